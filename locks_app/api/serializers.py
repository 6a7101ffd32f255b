"""Input and output shapes of the path-lock API.

Inputs are strict (unknown fields refused). ``paths``, ``lease_seconds`` and ``reason`` are
taken as raw JSON and parsed by the views after the channel is found, in the reference's order
of checks: ``selectors.lock_paths_parse``, ``services.lock_reason_check`` and
``Duration.parse``, whose refusal waits for the service (state before duration).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentchat.core.http import schema as openapi
from agentchat.core.http.pages import PageOutput
from agentchat.core.http.rest import RawJSONField, StrictSerializer
from agentchat.core.rules.validation import REASON_MAX
from locks_app.paths import MAX_PATHS

# The JSON schema of each raw field (documentation: the services judge the values).
PATHS_SCHEMA = {
    "type": "array",
    "items": openapi.WORKSPACE_PATH,
    "minItems": 1,
    "maxItems": MAX_PATHS,
    "description": openapi.WORKSPACE_PATH_RULES
    + " A segment with `*`, `?` or `[…]` is a glob pattern; a path may hold at most 16 "
    "wildcards, and comparing a request's paths with each other and with the locks held has a "
    "work budget (both PATH_LOCK_PATTERN_TOO_COMPLEX).",
}


class PathsField(RawJSONField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(openapi=PATHS_SCHEMA, **kwargs)


class PathField(RawJSONField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(openapi=openapi.WORKSPACE_PATH, **kwargs)


class LeaseSecondsField(RawJSONField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(openapi=openapi.lease_seconds(), **kwargs)


class ReasonField(RawJSONField):
    def __init__(self, **kwargs: Any) -> None:
        schema = openapi.one_line(max_length=REASON_MAX, non_blank=True)
        super().__init__(openapi=schema, **kwargs)


class LockCreateInput(StrictSerializer):
    openapi_schema = {"required": ["paths"]}
    paths = PathsField(
        required=False,
        default=None,
        help_text="1-64 workspace-relative paths or glob patterns (at most 16 wildcards each); "
        "a trailing / marks a directory",
    )
    lease_seconds = LeaseSecondsField(
        required=False,
        default=300,
        help_text="seconds > 0, at most AGENTCHAT_MAX_LEASE_SECONDS (24 h unless configured); "
        "default 300",
    )


class LockCheckInput(StrictSerializer):
    openapi_schema = {"required": ["paths"]}
    paths = PathsField(required=False, default=None)


class LockRecoverByPathInput(StrictSerializer):
    openapi_schema = {"required": ["path", "reason"]}
    path = PathField(required=False, default=None, help_text="an exact normalized path of the lock")
    reason = ReasonField(
        required=False, default=None, help_text="non-empty, one line, at most 1000 characters"
    )
    lease_seconds = LeaseSecondsField(
        required=False, default=300, help_text="the new lease: as for locking"
    )


class LockRecoverInput(StrictSerializer):
    openapi_schema = {"required": ["reason"]}
    reason = ReasonField(
        required=False, default=None, help_text="non-empty, one line, at most 1000 characters"
    )
    lease_seconds = LeaseSecondsField(
        required=False, default=300, help_text="the new lease: as for locking"
    )


class LockPathOutput(serializers.Serializer):
    display_path = serializers.CharField(help_text="the path as sent")
    kind = serializers.ChoiceField(choices=["file", "directory"])
    normalized_path = serializers.CharField()


class LockOutput(serializers.Serializer):
    channel = serializers.CharField()
    expires_at = serializers.CharField(help_text="2026-11-29T15:46:20.000000+00:00")
    lock_id = serializers.CharField()
    locked_at = serializers.CharField()
    owner = serializers.CharField()
    paths = LockPathOutput(many=True)
    previous_expires_at = serializers.CharField(allow_null=True)
    previous_owner = serializers.CharField(allow_null=True)
    recovery_reason = serializers.CharField(allow_null=True)
    updated_at = serializers.CharField()
    fence = serializers.IntegerField(
        required=False,
        help_text="the fencing token: handed out by the channel on the lock's acquisition and "
        "each recovery (not in the folder's record)",
    )


class LockListOutput(PageOutput):
    locks = LockOutput(many=True)


class LockConflictOutput(serializers.Serializer):
    lock_id = serializers.CharField()
    owner = serializers.CharField()
    expires_at = serializers.CharField()
    expired = serializers.BooleanField()
    paths = LockPathOutput(many=True)


class LockCheckOutput(serializers.Serializer):
    conflicts = LockConflictOutput(many=True)
    conflicts_total = serializers.IntegerField(
        required=False,
        help_text="only when `conflicts` lists the first 50 of more: how many locks overlap",
    )
    truncated = serializers.BooleanField(
        required=False, help_text="only when `conflicts` is cut: `true`"
    )
