"""The agent registry's API (EP-0118): ``agents/`` (the list), ``agents/register/``,
``agents/heartbeat/`` and ``agents/idle/`` (the EP's ``tired``). Thin: parse, then the
registry's services (``agentchat.core.identity.registry``); a session names a channel, looked up
as the caller may see it."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework import status as http
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http import pages
from agentchat.core.http import schema as openapi
from agentchat.core.http.query import query_parameters
from agentchat.core.http.rest import StrictCharField, StrictSerializer
from agentchat.core.http.schema import raises
from agentchat.core.identity import registry
from agentchat.core.identity.auth import AgentRequest
from agentchat.core.rules.names import check_agent_name
from agentchat.core.rules.presence import (
    CONVERSATION_ID_MAX,
    HARNESS_MAX,
    HEARTBEAT_STATUSES,
    NOTE_MAX,
    RUN_TOKEN_MAX,
    STATUSES,
    SUBSTRATE_MAX,
)
from channels_app import selectors
from channels_app.api.serializers import INPUT_CODES
from channels_app.presence import registry_page

_AGENT_HELP = (
    "the agent the session is: the token's own or one of its sub-agents (`alice.critic`); "
    "default the token's agent"
)
_RUN_TOKEN_HELP = (
    "the session's run token: when given it must be the registration's (another one: 409 "
    "AGENT_ALREADY_ACTIVE while that registration is live, else 404 AGENT_NOT_REGISTERED)"
)
_NAMING_CODES = ("INVALID_NAME", "AGENT_OUTSIDE_NAMESPACE")


def _agent_field(help_text: str) -> StrictCharField:
    return StrictCharField(
        required=False, single_line=True, help_text=help_text, openapi=openapi.AGENT_NAME
    )


def _run_token_field(help_text: str) -> StrictCharField:
    return StrictCharField(
        required=False,
        single_line=True,
        help_text=help_text,
        openapi=openapi.one_line(max_length=RUN_TOKEN_MAX, non_blank=True),
    )


class RegisterInput(StrictSerializer):
    agent = _agent_field(
        "the agent to register as, the token's own or a sub-agent's (`alice.critic`); when "
        "omitted a new sub-agent id is generated in the EP's shape, "
        "`<agent>.<model>_<hash8>_<random12>`"
    )
    harness = StrictCharField(
        single_line=True,
        help_text="what runs the session (claude-code, codex, junie…)",
        openapi=openapi.one_line(max_length=HARNESS_MAX, non_blank=True),
    )
    substrate = StrictCharField(
        required=False,
        single_line=True,
        help_text="the model (claude-sonnet-4.6…); names a generated id",
        openapi=openapi.one_line(max_length=SUBSTRATE_MAX),
    )
    run_token = _run_token_field(
        "the session's own secret, kept to reclaim the registration after a restart; made and "
        "answered once when omitted"
    )
    conversation_id = StrictCharField(
        required=False,
        single_line=True,
        help_text="the harness's conversation id: its hash is part of a generated id",
        openapi=openapi.one_line(max_length=CONVERSATION_ID_MAX),
    )
    session = StrictCharField(
        required=False,
        single_line=True,
        help_text="the channel that is the EP's session: the idle handshake counts its "
        "registrations",
        openapi=openapi.CHANNEL_NAME,
    )


class HeartbeatInput(StrictSerializer):
    agent = _agent_field(_AGENT_HELP)
    run_token = _run_token_field(_RUN_TOKEN_HELP)
    # Patterns, not enums, here and in the outputs: drf-spectacular names enums by field name,
    # and another `status` enum would rename the tasks' StatusEnum.
    status = StrictCharField(
        required=False,
        single_line=True,
        help_text="default active: a heartbeat as active after the idle handshake reverses it",
        openapi={"pattern": f"^(?:{'|'.join(HEARTBEAT_STATUSES)})$"},
    )


class IdleInput(StrictSerializer):
    agent = _agent_field(_AGENT_HELP)
    run_token = _run_token_field(_RUN_TOKEN_HELP)
    note = StrictCharField(
        required=False,
        help_text="what the session leaves said (shown in the list)",
        openapi={"maxLength": NOTE_MAX},
    )


class RegistrationOutput(serializers.Serializer[Any]):
    agent = serializers.CharField()
    kind = serializers.ChoiceField(choices=["agent", "human"])
    status = StrictCharField(
        allow_null=True,
        help_text="stale: silent past AGENTCHAT_STALE_SECONDS; null: never registered",
        openapi={"pattern": f"^(?:{'|'.join(STATUSES)})$"},
    )
    last_seen = serializers.DateTimeField(
        allow_null=True, help_text="the last heartbeat (every request of the agent is one)"
    )
    harness = serializers.CharField(allow_null=True)
    substrate = serializers.CharField(allow_null=True)
    session = serializers.CharField(
        allow_null=True, help_text="the session's channel, when the caller may see it"
    )
    joined_at = serializers.DateTimeField(allow_null=True)
    note = serializers.CharField(allow_null=True, help_text="said going idle")


class RegisteredOutput(RegistrationOutput):
    run_token = serializers.CharField(
        required=False, help_text="only when the server made it: keep it to reclaim"
    )


class RegistryOutput(pages.PageOutput):
    agents = RegistrationOutput(many=True)


class IdleOutput(serializers.Serializer[Any]):
    agent = serializers.CharField()
    status = StrictCharField(openapi={"pattern": "^idle$"})
    others_active = serializers.IntegerField(
        help_text="the other registrations of the session that are active and fresh"
    )
    last = serializers.BooleanField(help_text="no other is: this session is the last one out")


def _session(request: AgentRequest, name: str | None) -> str:
    """The canonical name of the session's channel, as the caller may see it ("" for none)."""
    if name is None:
        return ""
    return selectors.channel_get(name, viewer=request.user.name).name


class AgentListApi(APIView):
    heavy_methods = ("GET",)  # agentchat.core.db.heavy

    @extend_schema(
        operation_id="agents_list",
        responses=RegistryOutput,
        extensions=raises("INVALID_VALUE", "INVALID_NAME", "CHANNEL_NOT_FOUND"),
        summary="The agent registry: every agent with its status, last heartbeat and harness",
        description=(
            "Every agent by name, a page at a time: a registered one with its status (active, "
            "idle, sleeping, or stale once silent past AGENTCHAT_STALE_SECONDS), `last_seen` "
            "(its last heartbeat), harness and substrate; one that never registered with "
            "`status: null`. `session=<channel>`: the registrations of that session only."
        ),
    )
    @query_parameters(
        *openapi.page_parameters(
            openapi.AGENT_NAME, "the agent name of the previous page's `next`"
        ),
        OpenApiParameter(
            "session", openapi.CHANNEL_NAME, description="only the agents registered in it"
        ),
    )
    def get(self, request: AgentRequest) -> Any:
        window = pages.window_parse(
            request.query_params, lambda value: check_agent_name(value, field="after")
        )
        session = request.query_params.get("session")
        channel = (
            None if session is None else selectors.channel_get(session, viewer=request.user.name)
        )
        page = registry_page(viewer=request.user.name, window=window, session=channel)
        return pages.page_response("agents", page)


class AgentRegisterApi(APIView):
    implicit_heartbeat = False  # it writes the registration itself

    @extend_schema(
        operation_id="agents_register",
        request=RegisterInput,
        responses={201: RegisteredOutput, 200: RegisteredOutput},
        extensions=raises(
            *INPUT_CODES,
            *_NAMING_CODES,
            "CHANNEL_NOT_FOUND",
            "AGENT_ALREADY_ACTIVE",
            "RATE_LIMITED",
        ),
        summary="Register a session as an agent (201), or reclaim its registration (200)",
        description=(
            "A second session registering as an agent whose registration is live (heard from "
            "within AGENTCHAT_STALE_SECONDS and not idle) with another run token gets 409 "
            "AGENT_ALREADY_ACTIVE; with the same run token it reclaims it (200). Over a stale or "
            "idle registration a new one takes the slot (201), and the old run token is "
            "refused from then on. A sub-agent made here (a new name) takes a post from the "
            "caller's post budget (AGENTCHAT_POST_RATE)."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest) -> Response:
        data = RegisterInput.validate_input(request.data)
        data["session"] = _session(request, data.get("session"))
        registered = registry.agent_register(caller=request.user, **data)
        body = dict(registered.record)
        if registered.run_token is not None:
            body["run_token"] = registered.run_token
        return Response(body, status=http.HTTP_201_CREATED if registered.created else 200)


class AgentHeartbeatApi(APIView):
    implicit_heartbeat = False  # it writes the registration itself

    @extend_schema(
        operation_id="agents_heartbeat",
        request=HeartbeatInput,
        responses=RegistrationOutput,
        extensions=raises(
            *INPUT_CODES, *_NAMING_CODES, "AGENT_NOT_REGISTERED", "AGENT_ALREADY_ACTIVE"
        ),
        summary="Say the session is alive, and its status (active or sleeping)",
        description=(
            "Every authenticated request is a heartbeat of the token's agent already; this one "
            "also sets the status, and may name a sub-agent."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest) -> Response:
        data = HeartbeatInput.validate_input(request.data)
        return Response(registry.agent_heartbeat(caller=request.user, **data))


class AgentIdleApi(APIView):
    implicit_heartbeat = False  # it writes the registration itself

    @extend_schema(
        operation_id="agents_idle",
        request=IdleInput,
        responses=IdleOutput,
        extensions=raises(
            *INPUT_CODES, *_NAMING_CODES, "AGENT_NOT_REGISTERED", "AGENT_ALREADY_ACTIVE"
        ),
        summary="The idle handshake (the EP's tired): go idle, and learn whether others remain",
        description=(
            "Marks the registration idle and counts the other registrations of its session "
            "that are active and fresh, in one transaction: of sessions finishing at once, "
            "exactly one is told `last: true`. A later heartbeat as active reverses it."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest) -> Response:
        data = IdleInput.validate_input(request.data)
        return Response(registry.agent_idle(caller=request.user, **data).to_dict())
