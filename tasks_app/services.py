"""Every write of tasks_app: tasks, dependencies and leases (CLI "task" commands).

Each public function is one ``write_atomic()`` transaction that changes the task, its lease
and the lease history, and posts the audit message (``channels_app.services.audit_post``)
in the same transaction: the change and its audit commit together or not at all, so there is
never a pending transaction to recover.

Concurrency. Every mutation first locks the channel row (PostgreSQL; on SQLite
``write_atomic`` already runs one writer at a time), the row the audit message must lock
anyway to allocate its seq. Mutations of one channel's tasks therefore see each other's
committed state, which the dependency graph needs: two updates adding ``A -> B`` and
``B -> A`` concurrently must not both pass the cycle check. Under it, the task row is written
by compare-and-set on ``revision`` and the one-to-one lease row admits one active lease per
task, so a caller that skipped the lock still could not double-claim.

Check order follows the reference CLI: state before duration; recover checks the reason
first; renew/done/release check the owner, then expiry; a generic update of a leased task
checks expiry, then owner, then the protected fields.

Times: "now" is ``clock.now()`` truncated to whole seconds, as the reference's clock, so a
fractional lease (0.5 s) shows as ``.500000``; expired means ``lease_expires_at <= now``.
"""

from __future__ import annotations

import math
import ntpath
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Any, NoReturn

from django.db import IntegrityError, transaction
from django.db.models import F
from django.db.models.functions import Lower

from agentchat.core import clock
from agentchat.core.api import field_size_check
from agentchat.core.db import write_atomic
from agentchat.core.errors import AppError
from agentchat.core.names import check_agent_name
from channels_app.models import Channel
from channels_app.services import audit_post
from tasks_app import selectors
from tasks_app.models import Lease, LeaseHistory, Task, TaskDependency

DEFAULT_LEASE_SECONDS = 300
# Reserved: ``POST …/tasks/recover-pending/`` is routed before ``…/tasks/<id>/``.
RESERVED_TASK_IDS = frozenset({"recover-pending"})

Status = Task.Status
TRANSITIONS: dict[str, frozenset[str]] = {
    Status.OPEN: frozenset({Status.OPEN, Status.IN_PROGRESS, Status.BLOCKED, Status.CANCELLED}),
    Status.IN_PROGRESS: frozenset(
        {Status.IN_PROGRESS, Status.OPEN, Status.BLOCKED, Status.DONE, Status.CANCELLED}
    ),
    Status.BLOCKED: frozenset({Status.BLOCKED, Status.OPEN, Status.IN_PROGRESS, Status.CANCELLED}),
    Status.DONE: frozenset({Status.DONE}),
    Status.CANCELLED: frozenset({Status.CANCELLED}),
}
# Entering these needs every dependency done.
NEEDS_READY = frozenset({Status.IN_PROGRESS, Status.DONE})


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


# --- time and durations -------------------------------------------------------------------------


def service_now() -> datetime:
    return clock.now().replace(microsecond=0)


def lease_expiry(now: datetime, lease_seconds: object) -> datetime:
    """``now + lease_seconds``. Raises LEASE_INVALID_DURATION unless ``lease_seconds`` is a
    JSON number (not a bool), finite, > 0, with a representable expiry."""

    def invalid(message: str) -> NoReturn:
        raise AppError("LEASE_INVALID_DURATION", message, detail={"field": "lease_seconds"})

    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)):
        invalid("lease duration must be a number of seconds")
    if isinstance(lease_seconds, float) and not math.isfinite(lease_seconds):
        invalid("lease duration must be positive")
    if lease_seconds <= 0:
        invalid("lease duration must be positive")
    try:
        return now + timedelta(seconds=lease_seconds)
    except (OverflowError, ValueError):
        invalid("lease duration is outside the supported timestamp range")


def _is_expired(lease: Lease, now: datetime) -> bool:
    return lease.lease_expires_at <= now


# --- value checks (the reference's record rules) ------------------------------------------------


def _check_text(value: object, field: str, code: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise AppError(code, f"{field} must be a string", detail={"field": field})
    if not allow_empty and not value.strip():
        raise AppError(code, f"{field} must not be empty", detail={"field": field})
    if "\x00" in value or "\r" in value or "\n" in value:
        raise AppError(
            code, f"{field} contains a forbidden control character", detail={"field": field}
        )
    field_size_check(field, value)
    return value


_LIST_CODES = {
    "depends_on": "TASK_INVALID_DEPENDS_ON",
    "files_hint": "TASK_INVALID_FILES_HINT",
    "acceptance": "TASK_INVALID_ACCEPTANCE",
}


def _check_list(value: object, field: str) -> list[Any]:
    if not isinstance(value, list):
        raise AppError(_LIST_CODES[field], f"{field} must be a JSON array", detail={"field": field})
    return value


def _check_workspace_path(path: object) -> str:
    """A files_hint entry: workspace-relative, no drive, no ``:``, no ``..``."""

    def outside(reason: str) -> NoReturn:
        raise AppError(
            "TASK_PATH_OUTSIDE_WORKSPACE",
            f"files_hint path is outside the channel workspace: {path!r} ({reason})",
            detail={"field": "files_hint", "path": path if isinstance(path, str) else None},
        )

    if not isinstance(path, str) or not path or "\x00" in path:
        outside("invalid path text")
    field_size_check("files_hint", path)
    portable = path.replace("\\", "/")
    drive, _ = ntpath.splitdrive(portable)
    if drive or portable.startswith("/"):
        outside("absolute paths are not allowed")
    if ":" in portable:
        outside("path names may not contain ':'")
    if ".." in PurePosixPath(portable).parts:
        outside("parent traversal is not allowed")
    return path


def _check_depends_on(value: object) -> list[str]:
    result: list[str] = []
    for item in _check_list(value, "depends_on"):
        dependency = selectors.check_task_id(
            item, field="dependency", code="TASK_INVALID_DEPENDENCY_ID"
        )
        if dependency in result:
            raise AppError(
                "TASK_DUPLICATE_DEPENDENCY",
                f"dependency is listed more than once: {dependency}",
                detail={"field": "depends_on", "dependency": dependency},
            )
        result.append(dependency)
    return result


def _check_files_hint(value: object) -> list[str]:
    return [_check_workspace_path(item) for item in _check_list(value, "files_hint")]


def _check_acceptance(value: object) -> list[str]:
    return [
        _check_text(item, "acceptance item", "TASK_INVALID_ACCEPTANCE")
        for item in _check_list(value, "acceptance")
    ]


def _check_owner(value: object) -> str:
    return check_agent_name(value, field="owner", code="TASK_INVALID_OWNER")


def _check_status(value: object) -> str:
    if not isinstance(value, str) or value not in selectors.STATUSES:
        raise AppError(
            "TASK_INVALID_STATUS",
            f"unknown task status: {value!r}",
            detail={"field": "status", "value": value if isinstance(value, str) else None},
        )
    return value


def _check_reason(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AppError(
            "LEASE_INVALID_REASON", "recovery reason must not be empty", detail={"field": "reason"}
        )
    if "\x00" in value or "\r" in value or "\n" in value:
        raise AppError(
            "LEASE_INVALID_REASON",
            "recovery reason contains a forbidden control character",
            detail={"field": "reason"},
        )
    field_size_check("reason", value)
    return value


# --- state checks ---------------------------------------------------------------------------------


def _check_transition(task: Task, new_status: str) -> None:
    old_status, new_status = str(task.status), str(new_status)
    if new_status not in TRANSITIONS[old_status]:
        raise AppError(
            "TASK_INVALID_TRANSITION",
            f"transition {old_status!r} -> {new_status!r} is not allowed",
            detail={"task_id": task.task_id, "old_status": old_status, "new_status": new_status},
        )


def _check_ready(task_id: str, new_status: str, dependencies: Sequence[Task]) -> None:
    if new_status not in NEEDS_READY:
        return
    blocked_by = [
        {"id": dep.task_id, "status": dep.status}
        for dep in dependencies
        if dep.status != Status.DONE
    ]
    if blocked_by:
        ids = ", ".join(item["id"] for item in blocked_by)
        raise AppError(
            "TASK_DEPENDENCY_NOT_READY",
            f"task {task_id} depends on unfinished tasks: {ids}",
            detail={"task_id": task_id, "blocked_by": blocked_by},
        )


def _check_graph(*, channel: Channel, task_id: str, depends_on: list[str]) -> list[Task]:
    """The dependency rows ``task_id`` would have. Raises TASK_UNKNOWN_DEPENDENCY,
    TASK_DEPENDENCY_CYCLE. The graph was acyclic before, so a new cycle runs through
    ``task_id``."""
    tasks = {
        task.task_id: task
        for task in Task.objects.filter(channel=channel).only("id", "task_id", "status")
    }
    for dependency in depends_on:
        if dependency not in tasks and dependency != task_id:
            raise AppError(
                "TASK_UNKNOWN_DEPENDENCY",
                f"task {task_id} references unknown dependency {dependency}",
                detail={"task_id": task_id, "dependency": dependency},
            )
    edges: dict[str, list[str]] = {}
    rows = TaskDependency.objects.filter(task__channel=channel).order_by("task_id", "position")
    for source, target in rows.values_list("task__task_id", "dependency__task_id"):
        edges.setdefault(source, []).append(target)
    edges[task_id] = depends_on
    # Depth-first from task_id; a path back to it is the cycle.
    stack: list[tuple[str, list[str]]] = [(task_id, [task_id])]
    seen: set[str] = set()
    while stack:
        node, path = stack.pop()
        for target in edges.get(node, []):
            if target == task_id:
                raise AppError(
                    "TASK_DEPENDENCY_CYCLE",
                    f"dependency cycle includes task {task_id}",
                    detail={"task_id": task_id, "cycle": [*path, task_id]},
                )
            if target not in seen:
                seen.add(target)
                stack.append((target, [*path, target]))
    return [tasks[dependency] for dependency in depends_on]


# --- writes ---------------------------------------------------------------------------------------


def _lock_channel(channel: Channel) -> None:
    # See the module docstring. A no-op on SQLite, where write_atomic serialises writers.
    list(Channel.objects.select_for_update().filter(pk=channel.pk).values_list("pk", flat=True))


def _task_write(task: Task, *, conflict_code: str = "TASK_CONFLICT", **fields: Any) -> None:
    """Compare-and-set on ``revision``; the lock makes a lost race impossible, this makes it
    loud if a future caller skips the lock."""
    written = Task.objects.filter(pk=task.pk, revision=task.revision).update(
        revision=F("revision") + 1, **fields
    )
    if written != 1:
        raise AppError(
            conflict_code,
            f"task {task.task_id} was changed concurrently",
            detail={"task_id": task.task_id},
        )
    for name, value in fields.items():
        setattr(task, name, value)
    task.revision += 1


def _dependencies_replace(task: Task, dependencies: Iterable[Task]) -> None:
    TaskDependency.objects.filter(task=task).delete()
    TaskDependency.objects.bulk_create(
        TaskDependency(task=task, dependency=dependency, position=index)
        for index, dependency in enumerate(dependencies)
    )


def _reload_and_audit(
    task: Task,
    *,
    channel: Channel,
    actor: str,
    event: str,
    before: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> Task:
    """Reload the written task and post the reference's audit message of its new record:
    status = event, title ``<event> <task_id>``, body the key-sorted JSON payload
    (REFERENCE-CLI §3.13 with its correction). Returns the reloaded task."""
    task = selectors.task_get(channel=task.channel, task_id=task.task_id)
    after = selectors.task_record(task)
    payload: dict[str, Any] = {
        "event": event,
        "task_id": after["id"],
        "channel": after["channel"],
        "status": after["status"],
        "owner": after["owner"],
        "lease_expires_at": after["lease_expires_at"],
        "updated_at": after["updated_at"],
    }
    if before is not None:
        payload["previous_status"] = before["status"]
        payload["changed_fields"] = sorted(
            field for field in selectors.TASK_FIELDS if before[field] != after[field]
        )
    payload.update(details or {})
    audit_post(channel=channel, actor=actor, event=event, subject=after["id"], payload=payload)
    return task


def _history(
    task: Task,
    *,
    event: str,
    at: datetime,
    actor: str,
    owner: str,
    lease_expires_at: datetime | None,
    transaction_id: str,
    previous_owner: str = "",
    previous_lease_expires_at: datetime | None = None,
    recovery_reason: str = "",
) -> None:
    LeaseHistory.objects.create(
        task=task,
        event=event,
        at=at,
        actor=actor,
        owner=owner,
        lease_expires_at=lease_expires_at,
        previous_owner=previous_owner,
        previous_lease_expires_at=previous_lease_expires_at,
        recovery_reason=recovery_reason,
        transaction_id=transaction_id,
    )


def _dependencies(task: Task) -> list[Task]:
    return [link.dependency for link in selectors.task_links(task)]


# --- tasks ----------------------------------------------------------------------------------------


@write_atomic()
def task_create(
    *,
    channel: Channel,
    task_id: object,
    title: object,
    created_by: str,
    owner: object = None,
    depends_on: object = UNSET,
    files_hint: object = UNSET,
    acceptance: object = UNSET,
    branch: object = None,
) -> Task:
    """Create an open task and post ``task.created``.

    Raises TASK_INVALID_ID, TASK_INVALID_TITLE, TASK_INVALID_OWNER, TASK_INVALID_DEPENDS_ON,
    TASK_INVALID_DEPENDENCY_ID, TASK_DUPLICATE_DEPENDENCY, TASK_INVALID_FILES_HINT,
    TASK_PATH_OUTSIDE_WORKSPACE, TASK_INVALID_ACCEPTANCE, TASK_INVALID_BRANCH,
    FIELD_TOO_LARGE, TASK_ALREADY_EXISTS (ids are unique case-insensitively),
    TASK_UNKNOWN_DEPENDENCY, TASK_DEPENDENCY_CYCLE (a task depending on itself).
    """
    task_id = selectors.check_task_id(task_id)
    if task_id.lower() in RESERVED_TASK_IDS:
        raise AppError(
            "TASK_INVALID_ID", f"{task_id!r} is reserved", detail={"field": "id", "value": task_id}
        )
    title = _check_text(title, "title", "TASK_INVALID_TITLE", allow_empty=True)
    owner = None if owner is None else _check_owner(owner)
    depends_on = [] if depends_on is UNSET else _check_depends_on(depends_on)
    files_hint = [] if files_hint is UNSET else _check_files_hint(files_hint)
    acceptance = [] if acceptance is UNSET else _check_acceptance(acceptance)
    branch = None if branch is None else _check_text(branch, "branch", "TASK_INVALID_BRANCH")

    _lock_channel(channel)
    # Compared as lower(task_id), so the case-insensitive unique index answers it (``iexact``
    # compiles to LIKE / UPPER() and scanned every task of the channel).
    existing = (
        Task.objects.annotate(lower_id=Lower("task_id"))
        .filter(channel=channel, lower_id=task_id.lower())
        .first()
    )
    if existing is not None:
        raise AppError(
            "TASK_ALREADY_EXISTS",
            f"task record already exists: {existing.task_id}",
            detail={"task_id": existing.task_id},
        )
    dependencies = (
        _check_graph(channel=channel, task_id=task_id, depends_on=depends_on) if depends_on else []
    )
    now = service_now()
    try:
        with transaction.atomic():
            task = Task.objects.create(
                channel=channel,
                task_id=task_id,
                title=title,
                owner=owner or "",
                created_by=created_by,
                files_hint=files_hint,
                acceptance=acceptance,
                branch=branch or "",
                created_at=now,
                updated_at=now,
                updated_at_spelling=Task.Spelling.SECONDS,
            )
    except IntegrityError:  # the case-insensitive unique constraint
        raise AppError(
            "TASK_ALREADY_EXISTS",
            f"task record already exists: {task_id}",
            detail={"task_id": task_id},
        ) from None
    _dependencies_replace(task, dependencies)
    return _reload_and_audit(
        task,
        channel=channel,
        actor=created_by,
        event="task.created",
    )


def _update(*, channel: Channel, task_id: str, actor: str, changes: dict[str, Any]) -> Task:
    _lock_channel(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    lease = selectors.task_lease(task)
    if lease is not None:
        now = service_now()
        if _is_expired(lease, now):
            _raise_recovery_required(task, lease)
        if actor != lease.owner:
            _raise_owner_mismatch(task, lease, actor)
        protected = {"owner"} & set(changes)
        if "status" in changes and changes["status"] != task.status:
            protected.add("status")
        if protected:
            raise AppError(
                "LEASE_MUTATION_REQUIRED",
                f"task {task.task_id} must be changed through its lease operation",
                detail={"task_id": task.task_id, "protected_fields": sorted(protected)},
            )

    fields: dict[str, Any] = {}
    if "title" in changes:
        fields["title"] = _check_text(
            changes["title"], "title", "TASK_INVALID_TITLE", allow_empty=True
        )
    if "status" in changes:
        fields["status"] = _check_status(changes["status"])
    if "owner" in changes:
        fields["owner"] = "" if changes["owner"] is None else _check_owner(changes["owner"])
    depends_on = _check_depends_on(changes["depends_on"]) if "depends_on" in changes else None
    if "files_hint" in changes:
        fields["files_hint"] = _check_files_hint(changes["files_hint"])
    if "acceptance" in changes:
        fields["acceptance"] = _check_acceptance(changes["acceptance"])
    if "branch" in changes:
        branch = changes["branch"]
        fields["branch"] = (
            "" if branch is None else _check_text(branch, "branch", "TASK_INVALID_BRANCH")
        )

    new_status = fields.get("status", task.status)
    _check_transition(task, new_status)
    if depends_on is not None:
        dependencies = _check_graph(channel=channel, task_id=task.task_id, depends_on=depends_on)
    else:
        dependencies = _dependencies(task)
    _check_ready(task.task_id, new_status, dependencies)

    before = selectors.task_record(task)
    _task_write(
        task,
        updated_at=service_now(),
        updated_at_spelling=Task.Spelling.SECONDS,
        **fields,
    )
    if depends_on is not None:
        _dependencies_replace(task, dependencies)
    return _reload_and_audit(
        task,
        channel=channel,
        actor=actor,
        event="task.updated",
        before=before,
    )


@write_atomic()
def task_update(
    *,
    channel: Channel,
    task_id: str,
    actor: str,
    title: object = UNSET,
    status: object = UNSET,
    owner: object = UNSET,
    clear_owner: object = False,
    depends_on: object = UNSET,
    files_hint: object = UNSET,
    acceptance: object = UNSET,
    branch: object = UNSET,
    clear_branch: object = False,
) -> Task:
    """Generic update (lists replace; ``clear_owner``/``clear_branch`` set null); posts one
    ``task.updated``, also for a same-state write.

    Raises TASK_INVALID_UPDATE (nothing to change, or a field together with its clear form),
    TASK_INVALID_ID, TASK_NOT_FOUND; on a leased task LEASE_RECOVERY_REQUIRED (expired),
    LEASE_OWNER_MISMATCH, LEASE_MUTATION_REQUIRED (owner or a status change); then the
    value codes of ``task_create`` plus TASK_INVALID_STATUS, TASK_INVALID_TRANSITION,
    TASK_UNKNOWN_DEPENDENCY, TASK_DEPENDENCY_CYCLE, TASK_DEPENDENCY_NOT_READY.
    """
    for name, flag in (("clear_owner", clear_owner), ("clear_branch", clear_branch)):
        if not isinstance(flag, bool):
            raise AppError(
                "TASK_INVALID_UPDATE", f"{name} must be true or false", detail={"field": name}
            )
    changes = {
        name: value
        for name, value in (
            ("title", title),
            ("status", status),
            ("owner", owner),
            ("depends_on", depends_on),
            ("files_hint", files_hint),
            ("acceptance", acceptance),
            ("branch", branch),
        )
        if value is not UNSET
    }
    for name, flag, code in (
        ("owner", clear_owner, "TASK_INVALID_OWNER"),
        ("branch", clear_branch, "TASK_INVALID_BRANCH"),
    ):
        if name in changes and changes[name] is None:
            raise AppError(
                code,
                f"{name} must be a string (use clear_{name} to set it to null)",
                detail={"field": name},
            )
        if flag and name in changes:
            raise AppError(
                "TASK_INVALID_UPDATE",
                f"{name} and clear_{name} cannot be combined",
                detail={"field": f"clear_{name}"},
            )
        if flag:
            changes[name] = None
    if not changes:
        raise AppError("TASK_INVALID_UPDATE", "task update requires at least one field")
    return _update(channel=channel, task_id=task_id, actor=actor, changes=changes)


@write_atomic()
def task_block(*, channel: Channel, task_id: str, actor: str) -> Task:
    """``open``/``in_progress``/``blocked`` -> ``blocked``, posting ``task.updated``. A leased
    task cannot be blocked: LEASE_RECOVERY_REQUIRED, LEASE_OWNER_MISMATCH or, for its owner,
    LEASE_MUTATION_REQUIRED. Also TASK_NOT_FOUND, TASK_INVALID_TRANSITION."""
    return _update(
        channel=channel, task_id=task_id, actor=actor, changes={"status": Status.BLOCKED}
    )


# --- leases ---------------------------------------------------------------------------------------


def _raise_recovery_required(task: Task, lease: Lease) -> NoReturn:
    raise AppError(
        "LEASE_RECOVERY_REQUIRED",
        f"expired lease for task {task.task_id} requires explicit recovery",
        detail={
            "task_id": task.task_id,
            "previous_owner": lease.owner,
            "previous_lease_expires_at": selectors.ts_format(lease.lease_expires_at),
        },
    )


def _raise_owner_mismatch(task: Task, lease: Lease, actor: str) -> NoReturn:
    raise AppError(
        "LEASE_OWNER_MISMATCH",
        f"lease for task {task.task_id} belongs to {lease.owner}",
        detail={"task_id": task.task_id, "owner": actor, "current_owner": lease.owner},
    )


def _raise_lease_not_found(task: Task) -> NoReturn:
    raise AppError(
        "LEASE_NOT_FOUND",
        f"no active lease for task {task.task_id}",
        detail={"task_id": task.task_id},
    )


def _owned_lease(task: Task, actor: str, now: datetime) -> Lease | None:
    """The caller's unexpired lease, or None when the task has no lease."""
    lease = selectors.task_lease(task)
    if lease is None:
        return None
    if lease.owner != actor:
        _raise_owner_mismatch(task, lease, actor)
    if _is_expired(lease, now):
        _raise_recovery_required(task, lease)
    return lease


@write_atomic()
def lease_claim(
    *, channel: Channel, task_id: str, actor: str, lease_seconds: object = DEFAULT_LEASE_SECONDS
) -> Task:
    """Claim a ready task: ``in_progress``, owner and expiry written with the lease row; posts
    ``lease.claimed``.

    Raises TASK_NOT_FOUND; LEASE_RECOVERY_REQUIRED (an expired lease is never taken over),
    LEASE_CONFLICT (leased, or assigned to someone else); LEASE_INVALID_DURATION;
    TASK_INVALID_TRANSITION; TASK_DEPENDENCY_NOT_READY.
    """
    _lock_channel(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    now = service_now()
    lease = selectors.task_lease(task)
    if lease is not None:
        if _is_expired(lease, now):
            _raise_recovery_required(task, lease)
        raise AppError(
            "LEASE_CONFLICT",
            f"task {task.task_id} is leased by {lease.owner}",
            detail={
                "task_id": task.task_id,
                "owner": lease.owner,
                "lease_expires_at": selectors.ts_format(lease.lease_expires_at),
            },
        )
    if task.owner and task.owner != actor:
        raise AppError(
            "LEASE_CONFLICT",
            f"task {task.task_id} is assigned to {task.owner}",
            detail={"task_id": task.task_id, "owner": task.owner},
        )
    expires_at = lease_expiry(now, lease_seconds)
    _check_transition(task, Status.IN_PROGRESS)
    _check_ready(task.task_id, Status.IN_PROGRESS, _dependencies(task))

    before = selectors.task_record(task)
    try:
        with transaction.atomic():
            Lease.objects.create(
                task=task, owner=actor, lease_expires_at=expires_at, claimed_at=now, updated_at=now
            )
    except IntegrityError:  # one active lease per task
        raise AppError(
            "LEASE_CONFLICT",
            f"task {task.task_id} is already leased",
            detail={"task_id": task.task_id},
        ) from None
    _task_write(
        task,
        conflict_code="LEASE_CONFLICT",
        owner=actor,
        status=Status.IN_PROGRESS,
        updated_at=now,
        updated_at_spelling=Task.Spelling.MICROSECONDS,
    )
    transaction_id = uuid.uuid4().hex
    _history(
        task,
        event=LeaseHistory.Event.CLAIMED,
        at=now,
        actor=actor,
        owner=actor,
        lease_expires_at=expires_at,
        transaction_id=transaction_id,
    )
    return _reload_and_audit(
        task,
        channel=channel,
        actor=actor,
        event="lease.claimed",
        before=before,
        details={"lease_owner": actor, "transaction_id": transaction_id},
    )


@write_atomic()
def lease_renew(
    *, channel: Channel, task_id: str, actor: str, lease_seconds: object = DEFAULT_LEASE_SECONDS
) -> Task:
    """Extend the caller's unexpired lease to ``now + lease_seconds`` (``claimed_at`` kept);
    posts ``lease.renewed``.

    Raises TASK_NOT_FOUND, LEASE_NOT_FOUND, LEASE_OWNER_MISMATCH, LEASE_RECOVERY_REQUIRED,
    LEASE_INVALID_DURATION.
    """
    _lock_channel(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    now = service_now()
    lease = _owned_lease(task, actor, now)
    if lease is None:
        _raise_lease_not_found(task)
    expires_at = lease_expiry(now, lease_seconds)
    _check_transition(task, task.status)
    _check_ready(task.task_id, task.status, _dependencies(task))

    before = selectors.task_record(task)
    previous_expiry = lease.lease_expires_at
    Lease.objects.filter(pk=lease.pk).update(lease_expires_at=expires_at, updated_at=now)
    _task_write(task, updated_at=now, updated_at_spelling=Task.Spelling.MICROSECONDS)
    transaction_id = uuid.uuid4().hex
    _history(
        task,
        event=LeaseHistory.Event.RENEWED,
        at=now,
        actor=actor,
        owner=actor,
        lease_expires_at=expires_at,
        previous_lease_expires_at=previous_expiry,
        transaction_id=transaction_id,
    )
    return _reload_and_audit(
        task,
        channel=channel,
        actor=actor,
        event="lease.renewed",
        before=before,
        details={"lease_owner": actor, "transaction_id": transaction_id},
    )


def _lease_end(*, channel: Channel, task_id: str, actor: str, status: str) -> Task:
    """done (``status`` done) and release (``status`` open): with a lease, only its owner
    while unexpired, clearing owner and expiry; without one, a plain transition keeping the
    owner, audited as ``task.updated`` with ``lease_fallback``."""
    _lock_channel(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    now = service_now()
    lease = _owned_lease(task, actor, now)
    _check_transition(task, status)
    _check_ready(task.task_id, status, _dependencies(task))

    before = selectors.task_record(task)
    transaction_id = uuid.uuid4().hex
    completing = status == Status.DONE
    if lease is None:
        _task_write(
            task, status=status, updated_at=now, updated_at_spelling=Task.Spelling.MICROSECONDS
        )
        event = "task.updated"
        details: dict[str, Any] = {
            "lease_fallback": "complete" if completing else "release",
            "transaction_id": transaction_id,
        }
    else:
        previous_expiry = lease.lease_expires_at
        lease.delete()
        _task_write(
            task,
            owner="",
            status=status,
            updated_at=now,
            updated_at_spelling=Task.Spelling.MICROSECONDS,
        )
        event = "lease.completed" if completing else "lease.released"
        _history(
            task,
            event=event,
            at=now,
            actor=actor,
            owner=lease.owner,
            lease_expires_at=None,
            previous_lease_expires_at=previous_expiry,
            transaction_id=transaction_id,
        )
        details = {
            "lease_owner": lease.owner,
            "previous_lease_expires_at": selectors.ts_format(previous_expiry),
            "transaction_id": transaction_id,
        }
    return _reload_and_audit(
        task,
        channel=channel,
        actor=actor,
        event=event,
        before=before,
        details=details,
    )


@write_atomic()
def lease_complete(*, channel: Channel, task_id: str, actor: str) -> Task:
    """``task done``: posts ``lease.completed`` (leased) or ``task.updated`` with
    ``lease_fallback: "complete"``. Raises TASK_NOT_FOUND, LEASE_OWNER_MISMATCH,
    LEASE_RECOVERY_REQUIRED, TASK_INVALID_TRANSITION, TASK_DEPENDENCY_NOT_READY."""
    return _lease_end(channel=channel, task_id=task_id, actor=actor, status=Status.DONE)


@write_atomic()
def lease_release(*, channel: Channel, task_id: str, actor: str) -> Task:
    """``task release``: posts ``lease.released`` (leased) or ``task.updated`` with
    ``lease_fallback: "release"``. Raises TASK_NOT_FOUND, LEASE_OWNER_MISMATCH,
    LEASE_RECOVERY_REQUIRED, TASK_INVALID_TRANSITION."""
    return _lease_end(channel=channel, task_id=task_id, actor=actor, status=Status.OPEN)


@write_atomic()
def lease_recover(
    *,
    channel: Channel,
    task_id: str,
    actor: str,
    reason: object,
    lease_seconds: object = DEFAULT_LEASE_SECONDS,
    owner: str | None = None,
) -> Task:
    """Recover an expired lease: ``owner`` (default: the caller, who may be the previous
    owner) gets a fresh lease recording the previous owner, previous expiry and the reason;
    posts ``lease.recovered`` from ``actor``.

    Raises LEASE_INVALID_REASON (checked first), LEASE_INVALID_OWNER, TASK_NOT_FOUND,
    LEASE_NOT_FOUND, LEASE_NOT_EXPIRED, LEASE_INVALID_DURATION, TASK_INVALID_TRANSITION,
    TASK_DEPENDENCY_NOT_READY.
    """
    reason = _check_reason(reason)
    new_owner = check_agent_name(
        actor if owner is None else owner, field="owner", code="LEASE_INVALID_OWNER"
    )
    _lock_channel(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    lease = selectors.task_lease(task)
    if lease is None:
        _raise_lease_not_found(task)
    now = service_now()
    if not _is_expired(lease, now):
        raise AppError(
            "LEASE_NOT_EXPIRED",
            f"lease for task {task.task_id} is still active",
            detail={
                "task_id": task.task_id,
                "owner": lease.owner,
                "lease_expires_at": selectors.ts_format(lease.lease_expires_at),
            },
        )
    expires_at = lease_expiry(now, lease_seconds)
    _check_transition(task, Status.IN_PROGRESS)
    _check_ready(task.task_id, Status.IN_PROGRESS, _dependencies(task))

    before = selectors.task_record(task)
    previous_owner, previous_expiry = lease.owner, lease.lease_expires_at
    Lease.objects.filter(pk=lease.pk).update(
        owner=new_owner,
        lease_expires_at=expires_at,
        claimed_at=now,
        updated_at=now,
        previous_owner=previous_owner,
        previous_lease_expires_at=previous_expiry,
        recovery_reason=reason,
    )
    _task_write(
        task,
        owner=new_owner,
        status=Status.IN_PROGRESS,
        updated_at=now,
        updated_at_spelling=Task.Spelling.MICROSECONDS,
    )
    transaction_id = uuid.uuid4().hex
    _history(
        task,
        event=LeaseHistory.Event.RECOVERED,
        at=now,
        actor=actor,
        owner=new_owner,
        lease_expires_at=expires_at,
        previous_owner=previous_owner,
        previous_lease_expires_at=previous_expiry,
        recovery_reason=reason,
        transaction_id=transaction_id,
    )
    return _reload_and_audit(
        task,
        channel=channel,
        actor=actor,
        event="lease.recovered",
        before=before,
        details={
            "lease_owner": new_owner,
            "previous_owner": previous_owner,
            "previous_lease_expires_at": selectors.ts_format(previous_expiry),
            "recovery_reason": reason,
            "transaction_id": transaction_id,
        },
    )


def lease_recover_pending(*, channel: Channel) -> NoReturn:
    """Always LEASE_TRANSACTION_NOT_FOUND: every mutation here is one database transaction
    with its audit message, so nothing is ever left pending (the reference's crash markers
    have no counterpart)."""
    raise AppError(
        "LEASE_TRANSACTION_NOT_FOUND",
        "no pending lease transaction exists: the server commits every task and lease "
        "mutation together with its audit message in one database transaction, so there is "
        "never a pending transaction to recover",
        detail={"channel": channel.name},
    )
