"""Input and output shapes of the tasks API.

Inputs refuse unknown fields (TASK_UNKNOWN_FIELD / LEASE_UNKNOWN_FIELD) and missing required
ones; every value is checked by the service, which knows the reference's per-field codes and
check order (e.g. a claim on a leased task answers LEASE_CONFLICT before it looks at
``lease_seconds``). The raw fields below only document the JSON type for the OpenAPI schema.
"""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentchat.core.api import RawJSONField, StrictSerializer
from tasks_app.selectors import STATUSES


@extend_schema_field(OpenApiTypes.STR)
class RawStringField(RawJSONField):
    pass


@extend_schema_field(OpenApiTypes.NUMBER)
class RawNumberField(RawJSONField):
    pass


@extend_schema_field(OpenApiTypes.BOOL)
class RawBooleanField(RawJSONField):
    pass


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class RawStringListField(RawJSONField):
    pass


class TaskInput(StrictSerializer):
    unknown_field_code = "TASK_UNKNOWN_FIELD"
    code_map = {"required": "TASK_REQUIRED_FIELD_MISSING"}


class LeaseInput(StrictSerializer):
    unknown_field_code = "LEASE_UNKNOWN_FIELD"
    code_map = {"required": "LEASE_REQUIRED_FIELD_MISSING"}


LEASE_SECONDS_HELP = (
    "lease duration in seconds: a JSON number, finite, > 0, fractions allowed, at most "
    "AGENTCHAT_MAX_LEASE_SECONDS (default 86400); default 300. Anything else: "
    "LEASE_INVALID_DURATION"
)
ONE_LINE = "one line: no line separator or control character"


class TaskCreateInput(TaskInput):
    id = RawStringField(
        help_text="[A-Za-z0-9][A-Za-z0-9._-]*, at most 128; unique per channel case-insensitively"
    )
    title = RawStringField(help_text=f"may be empty; {ONE_LINE}")
    owner = RawStringField(required=False, help_text="an agent name, or null")
    depends_on = RawStringListField(
        required=False, help_text="task ids of this channel, at most 1000"
    )
    files_hint = RawStringListField(
        required=False, help_text="workspace-relative paths (the lock path rules), at most 1000"
    )
    acceptance = RawStringListField(
        required=False, help_text=f"non-blank criteria, each {ONE_LINE}; at most 1000"
    )
    branch = RawStringField(required=False, help_text=f"non-blank, {ONE_LINE}; or null")
    created_by = RawStringField(required=False, help_text="optional; must equal the caller")


class TaskUpdateInput(TaskInput):
    title = RawStringField(required=False)
    status = RawStringField(required=False, help_text="open, in_progress, blocked, done, cancelled")
    owner = RawStringField(required=False, help_text="an agent name; clear with clear_owner")
    clear_owner = RawBooleanField(required=False, help_text="true sets owner to null")
    depends_on = RawStringListField(required=False, help_text="replaces the list")
    files_hint = RawStringListField(required=False, help_text="replaces the list")
    acceptance = RawStringListField(required=False, help_text="replaces the list")
    branch = RawStringField(required=False, help_text="non-blank; clear with clear_branch")
    clear_branch = RawBooleanField(required=False, help_text="true sets branch to null")


class TaskBlockInput(TaskInput):
    """No body (or an empty object)."""


class LeaseEmptyInput(LeaseInput):
    """No body (or an empty object)."""


class LeaseDurationInput(LeaseInput):
    lease_seconds = RawNumberField(required=False, help_text=LEASE_SECONDS_HELP)


class LeaseRecoverInput(LeaseInput):
    reason = RawStringField(
        required=False,
        help_text=f"non-blank, {ONE_LINE}, at most 1000 characters (LEASE_INVALID_REASON)",
    )
    lease_seconds = RawNumberField(required=False, help_text=LEASE_SECONDS_HELP)


class RecoverPendingInput(LeaseInput):
    resolve_publication = RawStringField(
        required=False, help_text="accepted for CLI compatibility; there is never anything pending"
    )


# --- outputs (schema only: the selectors build the dicts) -----------------------------------------


class LeaseOutput(serializers.Serializer):
    task_id = serializers.CharField()
    channel = serializers.CharField()
    owner = serializers.CharField()
    lease_expires_at = serializers.CharField(help_text="ISO-8601, microseconds, +00:00")
    claimed_at = serializers.CharField()
    updated_at = serializers.CharField()
    previous_owner = serializers.CharField(allow_null=True)
    previous_lease_expires_at = serializers.CharField(allow_null=True)
    recovery_reason = serializers.CharField(allow_null=True)


class BlockedByOutput(serializers.Serializer):
    id = serializers.CharField()
    status = serializers.CharField()


class TaskOutput(serializers.Serializer):
    id = serializers.CharField()
    channel = serializers.CharField()
    title = serializers.CharField()
    status = serializers.ChoiceField(choices=list(STATUSES))
    owner = serializers.CharField(allow_null=True)
    created_by = serializers.CharField()
    depends_on = serializers.ListField(child=serializers.CharField())
    files_hint = serializers.ListField(child=serializers.CharField())
    acceptance = serializers.ListField(child=serializers.CharField())
    lease_expires_at = serializers.CharField(allow_null=True)
    branch = serializers.CharField(allow_null=True)
    updated_at = serializers.CharField(
        help_text="seconds precision after create/update, microseconds after a lease operation"
    )
    lease = LeaseOutput(allow_null=True, help_text="the active claim, expired or not")
    ready = serializers.BooleanField(help_text="every dependency is done")
    blocked_by = BlockedByOutput(many=True, help_text="dependencies not done")


class TaskListOutput(serializers.Serializer):
    tasks = TaskOutput(many=True)


class TaskErrorDetailOutput(serializers.Serializer):
    code = serializers.CharField()
    message = serializers.CharField()
    detail = serializers.DictField()


class TaskErrorOutput(serializers.Serializer):
    error = TaskErrorDetailOutput()
