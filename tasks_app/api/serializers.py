"""Input and output shapes of the tasks API.

Inputs refuse unknown fields (TASK_UNKNOWN_FIELD / LEASE_UNKNOWN_FIELD) and missing required
ones; every value is checked by the service, which knows the reference's per-field codes and
check order (e.g. a claim on a leased task answers LEASE_CONFLICT before it looks at
``lease_seconds``). The raw fields below only document the JSON type for the OpenAPI schema.
"""

from __future__ import annotations

from typing import Any, ClassVar

from rest_framework import serializers

from agentchat.core.http import schema as openapi
from agentchat.core.http.pages import PageOutput
from agentchat.core.http.rest import RawJSONField, StrictSerializer
from agentchat.core.rules.validation import REASON_MAX
from tasks_app.selectors import STATUSES, TASK_ID_MAX
from tasks_app.services.validation import LIST_MAX


class RawStringField(RawJSONField):
    """A JSON string (documented; the service judges it). Not null unless ``nullable``."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs["openapi"] = {"type": "string", **kwargs.get("openapi", {})}
        super().__init__(**kwargs)


class RawBooleanField(RawJSONField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs["openapi"] = {"type": "boolean", **kwargs.get("openapi", {})}
        super().__init__(**kwargs)


class RawStringListField(RawJSONField):
    """A JSON array of strings, each as ``item`` says; at most LIST_MAX items."""

    def __init__(self, *, item: dict[str, Any], unique: bool = False, **kwargs: Any) -> None:
        schema: dict[str, Any] = {"type": "array", "items": item, "maxItems": LIST_MAX}
        if unique:
            schema["uniqueItems"] = True
        kwargs["openapi"] = schema
        super().__init__(**kwargs)


class RawNumberField(RawJSONField):
    def __init__(self, **kwargs: Any) -> None:
        kwargs["openapi"] = openapi.lease_seconds()
        super().__init__(**kwargs)


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
TASK_ID = openapi.record_id(TASK_ID_MAX)
# "recover-pending" names the operation of that path, in any case.
TASK_ID_NEW = {
    **TASK_ID,
    "not": {"pattern": "^[Rr][Ee][Cc][Oo][Vv][Ee][Rr]-[Pp][Ee][Nn][Dd][Ii][Nn][Gg]$"},
}
FILES_HINT_HELP = (
    "workspace-relative paths (the lock path rules), at most 1000; kept as written. "
    + openapi.WORKSPACE_PATH_RULES
)


class TaskCreateInput(TaskInput):
    id = RawStringField(
        help_text="[A-Za-z0-9][A-Za-z0-9._-]*, at most 128; unique per channel case-insensitively"
        " (409 TASK_ALREADY_EXISTS); not recover-pending",
        openapi=TASK_ID_NEW,
    )
    title = RawStringField(help_text=f"may be empty; {ONE_LINE}", openapi=openapi.one_line())
    owner = RawStringField(
        required=False,
        nullable=True,
        help_text="an agent name, or null",
        openapi=openapi.AGENT_NAME,
    )
    depends_on = RawStringListField(
        required=False,
        item=TASK_ID,
        unique=True,
        help_text="task ids of this channel (else TASK_UNKNOWN_DEPENDENCY), at most 1000",
    )
    files_hint = RawStringListField(
        required=False, item=openapi.WORKSPACE_PATH, help_text=FILES_HINT_HELP
    )
    acceptance = RawStringListField(
        required=False,
        item=openapi.one_line(non_blank=True),
        help_text=f"non-blank criteria, each {ONE_LINE}; at most 1000",
    )
    branch = RawStringField(
        required=False,
        nullable=True,
        help_text=f"non-blank, {ONE_LINE}; or null",
        openapi=openapi.one_line(non_blank=True),
    )
    created_by = RawStringField(
        required=False, help_text="optional; must equal the caller", openapi=openapi.AGENT_NAME
    )


UPDATE_FIELDS = ("title", "status", "owner", "depends_on", "files_hint", "acceptance", "branch")


def _flag_set(flag: str) -> dict[str, Any]:
    return {"required": [flag], "properties": {flag: {"enum": [True]}}}


class TaskUpdateInput(TaskInput):
    # At least one change (a clear_ flag changes something only when true), and a field with
    # its clear_ form set excludes it: else TASK_INVALID_UPDATE.
    openapi_schema: ClassVar[dict[str, Any]] = {
        "anyOf": [{"required": [name]} for name in UPDATE_FIELDS]
        + [_flag_set(flag) for flag in ("clear_owner", "clear_branch")],
        "allOf": [
            {"not": {**_flag_set("clear_owner"), "required": ["owner", "clear_owner"]}},
            {"not": {**_flag_set("clear_branch"), "required": ["branch", "clear_branch"]}},
        ],
    }
    title = RawStringField(required=False, openapi=openapi.one_line())
    status = RawStringField(
        required=False,
        help_text="open, in_progress, blocked, done, cancelled",
        openapi={"enum": list(STATUSES)},
    )
    owner = RawStringField(
        required=False,
        help_text="an agent name; clear with clear_owner",
        openapi=openapi.AGENT_NAME,
    )
    clear_owner = RawBooleanField(required=False, help_text="true sets owner to null")
    depends_on = RawStringListField(
        required=False, item=TASK_ID, unique=True, help_text="replaces the list"
    )
    files_hint = RawStringListField(
        required=False, item=openapi.WORKSPACE_PATH, help_text="replaces the list"
    )
    acceptance = RawStringListField(
        required=False, item=openapi.one_line(non_blank=True), help_text="replaces the list"
    )
    branch = RawStringField(
        required=False,
        help_text="non-blank; clear with clear_branch",
        openapi=openapi.one_line(non_blank=True),
    )
    clear_branch = RawBooleanField(required=False, help_text="true sets branch to null")


class TaskBlockInput(TaskInput):
    """No body (or an empty object)."""


class LeaseEmptyInput(LeaseInput):
    """No body (or an empty object)."""


class LeaseDurationInput(LeaseInput):
    lease_seconds = RawNumberField(required=False, help_text=LEASE_SECONDS_HELP)


class LeaseRecoverInput(LeaseInput):
    openapi_schema: ClassVar[dict[str, Any]] = {"required": ["reason"]}
    reason = RawStringField(
        required=False,
        help_text=f"non-blank, {ONE_LINE}, at most 1000 characters (LEASE_INVALID_REASON)",
        openapi=openapi.one_line(max_length=REASON_MAX, non_blank=True),
    )
    lease_seconds = RawNumberField(required=False, help_text=LEASE_SECONDS_HELP)


class RecoverPendingInput(LeaseInput):
    resolve_publication = RawStringField(
        required=False,
        help_text="accepted for CLI compatibility; there is never anything pending",
        openapi={"pattern": openapi.TEXT_PATTERN},
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


class TaskRecordOutput(serializers.Serializer):
    """The task record (REFERENCE-CLI §3.7): what the API, the state summary and the folder
    share."""

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


class TaskOutput(TaskRecordOutput):
    lease = LeaseOutput(allow_null=True, help_text="the active claim, expired or not")
    ready = serializers.BooleanField(help_text="every dependency is done")
    blocked_by = BlockedByOutput(many=True, help_text="dependencies not done")


class TaskListOutput(PageOutput):
    tasks = TaskOutput(many=True)
