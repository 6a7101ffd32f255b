"""The fencing token's shapes on the API (``agentchat.core.rules.fence`` holds its rules): the
optional ``fence`` field of a holder's mutation and the answer of the check endpoints."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers

from agentchat.core.http.rest import RawJSONField
from agentchat.core.rules.fence import FENCE_MAX

FENCE_SCHEMA: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": FENCE_MAX}
FENCE_HELP = (
    "optional: the fence the caller was given; when it is not the current one the request is "
    "refused (409 STALE_FENCE) before anything else is judged. A JSON integer (not a boolean, "
    "not 1.0, not a string) from 0 to 10^18-1, else INVALID_FENCE"
)


class FenceField(RawJSONField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", FENCE_HELP)
        super().__init__(openapi=FENCE_SCHEMA, **kwargs)


FENCE_PARAMETER = OpenApiParameter(
    "fence",
    FENCE_SCHEMA,
    required=True,
    description="the fence to judge, in ASCII digits (else INVALID_FENCE)",
)


class FenceCheckOutput(serializers.Serializer[Any]):
    fence = serializers.IntegerField(
        allow_null=True, help_text="the current fence (null: no lock holds the path now)"
    )
    checked = serializers.IntegerField(help_text="the fence asked about")
    state = serializers.ChoiceField(
        choices=["current", "expired", "stale"],
        help_text="current: the live holder's fence; expired: the latest fence, but the lease "
        "or lock expired or ended; stale: a newer fence exists (or it never was this one's)",
    )
    owner = serializers.CharField(allow_null=True, help_text="the holder now, if any")
    expires_at = serializers.CharField(allow_null=True, help_text="the holder's expiry, if any")
