"""Input and output shapes of the tasks API, and the parse of each input.

A request is judged in two steps, in the reference's order. ``validate_input`` refuses unknown
fields (TASK_UNKNOWN_FIELD / LEASE_UNKNOWN_FIELD) and missing required ones, before the view
looks the channel up; then the input's ``parse`` turns the JSON values into what the service
takes, with the reference's per-field codes (``tasks_app.services.validation``). A value the
reference judges only after the state it acts on is parsed into a ``Parsed`` that holds its
refusal for the service to raise at that point (a claim on a leased task answers
LEASE_CONFLICT before it looks at ``lease_seconds``; an update of a missing task answers
TASK_NOT_FOUND before it looks at its fields). The raw fields below only document the JSON
type for the OpenAPI schema.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar, TypedDict, cast

from rest_framework import serializers

from agentchat.core.http import schema as openapi
from agentchat.core.http.fence import FenceField
from agentchat.core.http.pages import PageOutput
from agentchat.core.http.rest import RawJSONField, StrictSerializer
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.parsed import Parsed
from agentchat.core.rules.validation import REASON_MAX
from tasks_app.models import TASK_ID_MAX
from tasks_app.selectors import STATUSES
from tasks_app.services import TaskChanges
from tasks_app.services.validation import (
    DEFAULT_LEASE_SECONDS,
    LIST_MAX,
    acceptance_check,
    branch_check,
    depends_on_check,
    files_hint_check,
    lease_duration_parse,
    new_task_id_check,
    owner_check,
    reason_check,
    status_check,
    title_check,
)


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


class TaskNew(TypedDict):
    """A task to create, parsed: ``task_create``'s arguments after channel and creator."""

    task_id: str
    title: str
    owner: str | None
    depends_on: list[str]
    files_hint: list[str]
    acceptance: list[str]
    branch: str | None


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

    @classmethod
    def parse(cls, data: dict[str, Any]) -> TaskNew:
        """``validate_input``'s ``data`` as ``task_create`` takes it (``created_by`` is the
        view's), each value judged in the reference's order before the task is looked for.
        Raises TASK_INVALID_ID, TASK_INVALID_TITLE, TASK_INVALID_OWNER, TASK_INVALID_DEPENDS_ON,
        TASK_INVALID_DEPENDENCY_ID, TASK_DUPLICATE_DEPENDENCY, TASK_INVALID_FILES_HINT,
        TASK_PATH_OUTSIDE_WORKSPACE, TASK_INVALID_ACCEPTANCE, TASK_INVALID_BRANCH,
        FIELD_TOO_LARGE, INVISIBLE_CHARACTER."""
        task_id = new_task_id_check(data["id"])
        title = title_check(data["title"])
        owner = None if data.get("owner") is None else owner_check(data["owner"])
        depends_on = depends_on_check(data["depends_on"]) if "depends_on" in data else []
        files_hint = files_hint_check(data["files_hint"]) if "files_hint" in data else []
        acceptance = acceptance_check(data["acceptance"]) if "acceptance" in data else []
        branch = None if data.get("branch") is None else branch_check(data["branch"])
        return {
            "task_id": task_id,
            "title": title,
            "owner": owner,
            "depends_on": depends_on,
            "files_hint": files_hint,
            "acceptance": acceptance,
            "branch": branch,
        }


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

    # Each field of TaskChanges and its check, in the order they are judged.
    CHECKS: ClassVar[tuple[tuple[str, Callable[[Any], Any]], ...]] = (
        ("title", title_check),
        ("status", status_check),
        ("owner", owner_check),
        ("depends_on", depends_on_check),
        ("files_hint", files_hint_check),
        ("acceptance", acceptance_check),
        ("branch", branch_check),
    )

    @classmethod
    def parse(cls, data: dict[str, Any]) -> TaskChanges:
        """``validate_input``'s ``data`` as ``task_update`` takes it. The shape is judged now:
        TASK_INVALID_UPDATE (a clear_ flag that is not a boolean, a field with its clear_ form,
        nothing to change), TASK_INVALID_OWNER / TASK_INVALID_BRANCH (null instead of the
        clear_ form). Each value is parsed now and refused by the service, after the task and
        the caller's right to change it (``TaskChanges``)."""
        flags = {name: data.get(name, False) for name in ("clear_owner", "clear_branch")}
        for name, flag in flags.items():
            if not isinstance(flag, bool):
                raise AppError(
                    "TASK_INVALID_UPDATE", f"{name} must be true or false", detail={"field": name}
                )
        for name, code in (("owner", "TASK_INVALID_OWNER"), ("branch", "TASK_INVALID_BRANCH")):
            if name in data and data[name] is None:
                raise AppError(
                    code,
                    f"{name} must be a string (use clear_{name} to set it to null)",
                    detail={"field": name},
                )
            if flags[f"clear_{name}"] and name in data:
                raise AppError(
                    "TASK_INVALID_UPDATE",
                    f"{name} and clear_{name} cannot be combined",
                    detail={"field": f"clear_{name}"},
                )
        changes: dict[str, Parsed[Any]] = {}
        for name, check in cls.CHECKS:
            if name in data:
                changes[name] = Parsed.of(check, data[name])
            elif flags.get(f"clear_{name}"):
                changes[name] = Parsed.ok(None)
        if not changes:
            raise AppError("TASK_INVALID_UPDATE", "task update requires at least one field")
        return cast(TaskChanges, changes)


class TaskBlockInput(TaskInput):
    """No body (or an empty object)."""


class LeaseEmptyInput(LeaseInput):
    """No body (or an empty object), or only the fence the caller holds."""

    fence = FenceField()


def _duration(data: dict[str, Any]) -> Parsed[timedelta]:
    # Absent: the default, judged like a given one (a maximum set below it refuses it); null,
    # like any other non-number, is refused.
    return lease_duration_parse(data.get("lease_seconds", DEFAULT_LEASE_SECONDS))


class LeaseClaimInput(LeaseInput):
    lease_seconds = RawNumberField(required=False, help_text=LEASE_SECONDS_HELP)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Parsed[timedelta]:
        """As ``LeaseDurationInput.parse``."""
        return _duration(data)


class LeaseDurationInput(LeaseInput):
    lease_seconds = RawNumberField(required=False, help_text=LEASE_SECONDS_HELP)
    fence = FenceField()

    @classmethod
    def parse(cls, data: dict[str, Any]) -> Parsed[timedelta]:
        """The lease's duration, refused (LEASE_INVALID_DURATION) only by the service, after
        its state checks."""
        return _duration(data)


class LeaseRecoverArguments(TypedDict):
    reason: str
    duration: Parsed[timedelta]


class LeaseRecoverInput(LeaseInput):
    openapi_schema: ClassVar[dict[str, Any]] = {"required": ["reason"]}
    reason = RawStringField(
        required=False,
        help_text=f"non-blank, {ONE_LINE}, at most 1000 characters (LEASE_INVALID_REASON)",
        openapi=openapi.one_line(max_length=REASON_MAX, non_blank=True),
    )
    lease_seconds = RawNumberField(required=False, help_text=LEASE_SECONDS_HELP)

    @classmethod
    def parse(cls, data: dict[str, Any]) -> LeaseRecoverArguments:
        """The reason, judged now (LEASE_INVALID_REASON: the reference's first check of a
        recovery, a missing reason included), and the duration as ``LeaseDurationInput``'s."""
        return {"reason": reason_check(data.get("reason")), "duration": _duration(data)}


class RecoverPendingInput(LeaseInput):
    resolve_publication = RawStringField(
        required=False,
        help_text="accepted for CLI compatibility; there is never anything pending",
        openapi={"pattern": openapi.TEXT_PATTERN},
    )


# --- outputs (schema only: the selectors build the dicts) -----------------------------------------


class LeaseOutput(serializers.Serializer[Any]):
    task_id = serializers.CharField()
    channel = serializers.CharField()
    owner = serializers.CharField()
    lease_expires_at = serializers.CharField(help_text="ISO-8601, microseconds, +00:00")
    claimed_at = serializers.CharField()
    updated_at = serializers.CharField()
    previous_owner = serializers.CharField(allow_null=True)
    previous_lease_expires_at = serializers.CharField(allow_null=True)
    recovery_reason = serializers.CharField(allow_null=True)


class BlockedByOutput(serializers.Serializer[Any]):
    id = serializers.CharField()
    status = serializers.CharField()


class TaskRecordOutput(serializers.Serializer[Any]):
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
    fence = serializers.IntegerField(
        help_text="the fencing token: 0 before any claim, one more on every claim and recovery"
    )
    lease = LeaseOutput(allow_null=True, help_text="the active claim, expired or not")
    ready = serializers.BooleanField(help_text="every dependency is done")
    blocked_by = BlockedByOutput(many=True, help_text="dependencies not done")


class TaskListOutput(PageOutput):
    tasks = TaskOutput(many=True)
