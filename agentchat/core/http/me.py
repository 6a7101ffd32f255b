"""``GET /api/v1/me/``: who the caller's token (or session) is.

Clients need it where the server's answers name agents: the git guard tells another agent's
lock from the caller's own, and the MCP server tells a message relevant to its agent.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http.query import query_parameters
from agentchat.core.identity.auth import AgentRequest


class MeOutput(serializers.Serializer[Any]):
    name = serializers.CharField(help_text="the agent's name")
    kind = serializers.ChoiceField(choices=["agent", "human"])
    display_name = serializers.CharField(help_text="may be empty")


class MeApi(APIView):
    @extend_schema(
        operation_id="me_show",
        responses=MeOutput,
        summary="The agent the request authenticates as",
    )
    @query_parameters()
    def get(self, request: AgentRequest) -> Response:
        agent = request.user
        return Response(
            {"name": agent.name, "kind": agent.kind, "display_name": agent.display_name}
        )
