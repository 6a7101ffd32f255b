"""Tasks and leases from a reference folder (``tasks/<id>.json``, ``claims/<task>.<owner>.json``):
the reference's strict record rules (REFERENCE-CLI §3.7-3.8) as pure parsers, the checks that
span records (graph, lease consistency), and ``tasks_import``, the one write.

The parsers refuse what the reference's own readers refuse, with its codes, and what this
server's rules refuse on top (owners are agent names; a leased task is ``in_progress``; a
recovered lease records previous owner, expiry and reason together). Times keep the file's
spelling (``spellings``) beside the instant.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, cast

from django.db import IntegrityError, transaction

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import RECORD_ID_RE, check_agent_name
from agentchat.core.rules.records import ts_parse
from agentchat.core.rules.validation import text_check
from channels_app.models import Channel
from tasks_app import selectors
from tasks_app.models import OWNER_MAX, Lease, Task, TaskDependency
from tasks_app.records import LEASE_FIELDS, TASK_FIELDS
from tasks_app.services import graph
from tasks_app.services.validation import (
    RESERVED_TASK_IDS,
    acceptance_check,
    branch_check,
    depends_on_check,
    files_hint_check,
    owner_check,
    reason_check,
    status_check,
    title_check,
)

CREATED_BY_MAX = 200
_LEASE_REQUIRED = LEASE_FIELDS[:6]


@dataclass(frozen=True)
class TaskImport:
    source: str  # the file, for errors
    task_id: str
    title: str
    status: str
    owner: str | None
    created_by: str
    depends_on: list[str]
    files_hint: list[str]
    acceptance: list[str]
    lease_expires_at: str | None  # as spelled: compared with the claim's as text
    branch: str | None
    updated_at: datetime
    updated_at_text: str


class LeaseTimes(TypedDict):
    lease_expires_at: datetime
    claimed_at: datetime
    updated_at: datetime
    previous_lease_expires_at: datetime | None


@dataclass(frozen=True)
class LeaseImport:
    source: str
    task_id: str
    owner: str
    times: LeaseTimes
    spellings: dict[str, str]
    previous_owner: str | None
    recovery_reason: str | None


def _timestamp(value: Any, field: str, code: str) -> tuple[datetime, str]:
    parsed = ts_parse(value) if isinstance(value, str) else None
    if parsed is None or len(value) > 64:
        raise AppError(
            code,
            f"{field} must be an ISO-8601 string with an explicit UTC offset",
            detail={"field": field},
        )
    return parsed, value


def _keys_check(data: Any, fields: Sequence[str], required: Sequence[str], family: str) -> None:
    invalid, missing_code, unknown_code = {
        "task": ("TASK_INVALID_RECORD", "TASK_REQUIRED_FIELD_MISSING", "TASK_UNKNOWN_FIELD"),
        "lease": ("LEASE_INVALID_RECORD", "LEASE_REQUIRED_FIELD_MISSING", "LEASE_UNKNOWN_FIELD"),
    }[family]
    if not isinstance(data, dict):
        raise AppError(invalid, f"{family} record must be a JSON object")
    missing = [field for field in required if field not in data]
    if missing:
        raise AppError(
            missing_code,
            f"required {family} field is missing: {', '.join(missing)}",
            detail={"fields": missing},
        )
    unknown = sorted(str(key) for key in data if key not in fields)
    if unknown:
        raise AppError(
            unknown_code,
            f"{family} record contains unknown fields: {', '.join(unknown[:20])}",
            detail={"fields": unknown[:20]},
        )


def task_record_parse(data: Any, *, channel: str, stem: str, source: str) -> TaskImport:
    """One ``tasks/<stem>.json`` record. Raises the reference's TASK_* codes:
    TASK_INVALID_RECORD, TASK_REQUIRED_FIELD_MISSING, TASK_UNKNOWN_FIELD, TASK_INVALID_ID,
    TASK_RECORD_ID_MISMATCH, TASK_CHANNEL_MISMATCH, TASK_INVALID_TITLE, TASK_INVALID_STATUS,
    TASK_INVALID_OWNER, TASK_INVALID_CREATED_BY, TASK_INVALID_DEPENDS_ON,
    TASK_INVALID_DEPENDENCY_ID, TASK_DUPLICATE_DEPENDENCY, TASK_INVALID_FILES_HINT,
    TASK_PATH_OUTSIDE_WORKSPACE, TASK_INVALID_ACCEPTANCE, TASK_INVALID_TIMESTAMP,
    TASK_INVALID_BRANCH, FIELD_TOO_LARGE."""
    _keys_check(data, TASK_FIELDS, TASK_FIELDS, "task")
    task_id = selectors.task_id_check(data["id"])
    if task_id != stem:
        raise AppError(
            "TASK_RECORD_ID_MISMATCH",
            f"task id {task_id!r} does not match its file name",
            detail={"task_id": task_id},
        )
    if task_id.lower() in RESERVED_TASK_IDS:
        raise AppError("TASK_INVALID_ID", f"{task_id!r} is reserved", detail={"field": "id"})
    if data["channel"] != channel:
        raise AppError(
            "TASK_CHANNEL_MISMATCH",
            f"task channel {str(data['channel'])[:100]!r} does not match {channel!r}",
            detail={"task_id": task_id},
        )
    owner = data["owner"]
    created_by = text_check(
        data["created_by"],
        field="created_by",
        code="TASK_INVALID_CREATED_BY",
        single_line=True,
        max_chars=CREATED_BY_MAX,
        allow_empty=False,
    )
    lease_expires_at = data["lease_expires_at"]
    if lease_expires_at is not None:
        _timestamp(lease_expires_at, "lease_expires_at", "TASK_INVALID_TIMESTAMP")
    updated_at, updated_text = _timestamp(
        data["updated_at"], "updated_at", "TASK_INVALID_TIMESTAMP"
    )
    return TaskImport(
        source=source,
        task_id=task_id,
        title=title_check(data["title"]),
        status=status_check(data["status"]),
        owner=None if owner is None else owner_check(owner),
        created_by=created_by,
        depends_on=depends_on_check(data["depends_on"]),
        files_hint=files_hint_check(data["files_hint"]),
        acceptance=acceptance_check(data["acceptance"]),
        lease_expires_at=lease_expires_at,
        branch=None if data["branch"] is None else branch_check(data["branch"]),
        updated_at=updated_at,
        updated_at_text=updated_text,
    )


def _identity(value: Any, field: str, code: str) -> str:
    if not isinstance(value, str) or len(value) > OWNER_MAX or not RECORD_ID_RE.fullmatch(value):
        raise AppError(code, f"{field} must be a safe identity", detail={"field": field})
    return value


def lease_record_parse(data: Any, *, channel: str, name: str, source: str) -> LeaseImport:
    """One ``claims/<name>`` record. Raises LEASE_INVALID_RECORD, LEASE_REQUIRED_FIELD_MISSING,
    LEASE_UNKNOWN_FIELD, LEASE_INVALID_TASK_ID, LEASE_INVALID_OWNER, LEASE_INVALID_TIMESTAMP,
    LEASE_INVALID_REASON, LEASE_INCONSISTENT (another channel), LEASE_RECORD_ID_MISMATCH."""
    _keys_check(data, LEASE_FIELDS, _LEASE_REQUIRED, "lease")
    task_id = _identity(data["task_id"], "task_id", "LEASE_INVALID_TASK_ID")
    if data["channel"] != channel:
        raise AppError(
            "LEASE_INCONSISTENT",
            f"lease channel {str(data['channel'])[:100]!r} does not match {channel!r}",
            detail={"task_id": task_id},
        )
    owner = owner_check_lease(data["owner"], "owner")
    times: dict[str, datetime | None] = {}
    spellings: dict[str, str] = {}
    for field in ("lease_expires_at", "claimed_at", "updated_at", "previous_lease_expires_at"):
        value = data.get(field)
        if value is None and field == "previous_lease_expires_at":
            times[field] = None
            continue
        times[field], spellings[field] = _timestamp(value, field, "LEASE_INVALID_TIMESTAMP")
    parsed = cast(LeaseTimes, times)  # the four, None for the optional one only
    previous_owner = data.get("previous_owner")
    if previous_owner is not None:
        previous_owner = _identity(previous_owner, "previous_owner", "LEASE_INVALID_OWNER")
    reason = data.get("recovery_reason")
    if reason is not None:
        reason = reason_check(reason)
    if name != f"{task_id}.{owner}.json":
        raise AppError(
            "LEASE_RECORD_ID_MISMATCH",
            "lease identity does not match its file name",
            detail={"task_id": task_id, "owner": owner},
        )
    recovery = (previous_owner, parsed["previous_lease_expires_at"], reason)
    if any(value is not None for value in recovery) and None in recovery:
        raise AppError(
            "LEASE_INVALID_RECORD",
            "previous_owner, previous_lease_expires_at and recovery_reason are recorded together",
            detail={"task_id": task_id},
        )
    if parsed["lease_expires_at"] < parsed["claimed_at"]:
        raise AppError(
            "LEASE_INVALID_TIMESTAMP",
            "lease_expires_at is before claimed_at",
            detail={"field": "lease_expires_at"},
        )
    return LeaseImport(
        source=source,
        task_id=task_id,
        owner=owner,
        times=parsed,
        spellings=spellings,
        previous_owner=previous_owner,
        recovery_reason=reason,
    )


def owner_check_lease(value: Any, field: str) -> str:
    """A lease owner: an agent name (this server's rule; the reference takes any record id).
    Raises LEASE_INVALID_OWNER."""
    return check_agent_name(value, field=field, code="LEASE_INVALID_OWNER")


def tasks_consistency_check(tasks: Sequence[TaskImport], leases: Sequence[LeaseImport]) -> None:
    """What spans records, as the reference's stores judge it: ids unique (ignoring case, as
    this server keeps them), every dependency a task of the channel, no cycle; at most one
    claim per task, for a task that exists, whose owner and expiry are the task's (string-equal),
    and a task with an expiry has its claim. On top: a leased task is ``in_progress``.
    Error messages name the file. Raises TASK_ALREADY_EXISTS, TASK_UNKNOWN_DEPENDENCY,
    TASK_DEPENDENCY_CYCLE, LEASE_INCONSISTENT."""
    by_id: dict[str, TaskImport] = {}
    lowered: dict[str, TaskImport] = {}
    for task in tasks:
        other = lowered.get(task.task_id.lower())
        if other is not None:
            raise AppError(
                "TASK_ALREADY_EXISTS",
                f"{task.source}: task {task.task_id} and {other.task_id} ({other.source}) "
                "differ only in case",
                detail={"file": task.source, "task_id": task.task_id},
            )
        lowered[task.task_id.lower()] = by_id[task.task_id] = task
    for task in tasks:
        for dependency in task.depends_on:
            if dependency not in by_id:
                raise AppError(
                    "TASK_UNKNOWN_DEPENDENCY",
                    f"{task.source}: task {task.task_id} references unknown dependency "
                    f"{dependency}",
                    detail={"file": task.source, "task_id": task.task_id},
                )
    cycle = graph.graph_cycle({task.task_id: task.depends_on for task in tasks})
    if cycle:
        source = by_id[cycle[0]].source
        raise AppError(
            "TASK_DEPENDENCY_CYCLE",
            f"{source}: dependency cycle includes task {cycle[0]}",
            detail={"file": source, "task_id": cycle[0], "cycle": cycle[:50]},
        )
    claims: dict[str, LeaseImport] = {}
    for lease in leases:
        if lease.task_id not in by_id:
            raise AppError(
                "LEASE_INCONSISTENT",
                f"{lease.source}: claim for task {lease.task_id}, which has no record",
                detail={"file": lease.source, "task_id": lease.task_id},
            )
        task = by_id[lease.task_id]
        if lease.task_id in claims:
            raise AppError(
                "LEASE_INCONSISTENT",
                f"{lease.source}: multiple active leases exist for task {lease.task_id} "
                f"(also {claims[lease.task_id].source})",
                detail={"file": lease.source, "task_id": lease.task_id},
            )
        claims[lease.task_id] = lease
        if task.owner != lease.owner or task.lease_expires_at != lease.spellings.get(
            "lease_expires_at"
        ):
            raise AppError(
                "LEASE_INCONSISTENT",
                f"{lease.source}: task {task.task_id} and claim record disagree "
                f"(see {task.source})",
                detail={"file": lease.source, "task_id": task.task_id},
            )
        if task.status != Task.Status.IN_PROGRESS:
            raise AppError(
                "LEASE_INCONSISTENT",
                f"{task.source}: leased task {task.task_id} is {task.status}, not in_progress",
                detail={"file": task.source, "task_id": task.task_id},
            )
    for task in tasks:
        if task.lease_expires_at is not None and task.task_id not in claims:
            raise AppError(
                "LEASE_INCONSISTENT",
                f"{task.source}: task {task.task_id} has a lease expiry without an active claim "
                "record",
                detail={"file": task.source, "task_id": task.task_id},
            )


def _spelling(text: str) -> str:
    # A fraction of a second in the time part: the lease operations' spelling.
    return Task.Spelling.MICROSECONDS if "." in text.partition("T")[2] else Task.Spelling.SECONDS


def tasks_import(
    *, channel: Channel, tasks: Sequence[TaskImport], leases: Sequence[LeaseImport]
) -> None:
    """Store a channel's tasks, dependencies and leases as checked by ``task_record_parse``,
    ``lease_record_parse`` and ``tasks_consistency_check``, in the caller's transaction (the
    folder import's). No audit message is posted: the folder's own audit messages are imported
    as they are. Raises TASK_ALREADY_EXISTS (a task of the channel exists already)."""
    rows = [
        Task(
            channel=channel,
            task_id=task.task_id,
            title=task.title,
            status=task.status,
            owner=task.owner or "",
            created_by=task.created_by,
            files_hint=task.files_hint,
            acceptance=task.acceptance,
            branch=task.branch or "",
            # The record has no creation time; its last update is the nearest it knows.
            created_at=task.updated_at,
            updated_at=task.updated_at,
            updated_at_spelling=_spelling(task.updated_at_text),
            spellings={"updated_at": task.updated_at_text},
        )
        for task in tasks
    ]
    try:
        with transaction.atomic():
            Task.objects.bulk_create(rows, batch_size=500)
    except IntegrityError:
        raise AppError(
            "TASK_ALREADY_EXISTS",
            f"channel {channel.name!r} has tasks already",
            detail={"channel": channel.name},
        ) from None
    ids = dict(Task.objects.filter(channel=channel).values_list("task_id", "pk").iterator(2000))
    TaskDependency.objects.bulk_create(
        (
            TaskDependency(task_id=ids[task.task_id], dependency_id=ids[dependency], position=i)
            for task in tasks
            for i, dependency in enumerate(task.depends_on)
        ),
        batch_size=500,
    )
    Lease.objects.bulk_create(
        (
            Lease(
                task_id=ids[lease.task_id],
                owner=lease.owner,
                lease_expires_at=lease.times["lease_expires_at"],
                claimed_at=lease.times["claimed_at"],
                updated_at=lease.times["updated_at"],
                previous_owner=lease.previous_owner or "",
                previous_lease_expires_at=lease.times["previous_lease_expires_at"],
                recovery_reason=lease.recovery_reason or "",
                spellings=lease.spellings,
            )
            for lease in leases
        ),
        batch_size=500,
    )


def task_fences_restore(*, channel: Channel, fences: Mapping[str, int]) -> None:
    """Raise the fences of the channel's tasks (and of their leases, granted under them) to
    what a folder's sidecar kept (``agentchat.folder.fences``), never lowering one; ids the
    channel has no task of are ignored. In the caller's transaction (the folder import's)."""
    for task_id, fence in fences.items():
        if fence <= 0:
            continue
        Task.objects.filter(channel=channel, task_id=task_id, fence__lt=fence).update(fence=fence)
        Lease.objects.filter(task__channel=channel, task__task_id=task_id, fence__lt=fence).update(
            fence=fence
        )
