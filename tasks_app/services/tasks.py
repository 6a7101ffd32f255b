"""Tasks (CLI "task create / update / block"): each public function is one
``write_atomic()`` transaction that writes the task and its dependency rows and posts the
audit message in the same transaction."""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError, transaction
from django.db.models.functions import Lower

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from channels_app.locking import channel_lock
from channels_app.models import Channel
from tasks_app import selectors
from tasks_app.models import Task
from tasks_app.services import audit, graph, store
from tasks_app.services.leases import lease_update_guard
from tasks_app.services.ownership import task_owner_guard
from tasks_app.services.validation import (
    RESERVED_TASK_IDS,
    acceptance_check,
    branch_check,
    depends_on_check,
    files_hint_check,
    owner_check,
    status_check,
    title_check,
)

Status = Task.Status


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


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
    task_id = selectors.task_id_check(task_id)
    if task_id.lower() in RESERVED_TASK_IDS:
        raise AppError(
            "TASK_INVALID_ID", f"{task_id!r} is reserved", detail={"field": "id", "value": task_id}
        )
    title = title_check(title)
    owner = None if owner is None else owner_check(owner)
    depends_on = [] if depends_on is UNSET else depends_on_check(depends_on)
    files_hint = [] if files_hint is UNSET else files_hint_check(files_hint)
    acceptance = [] if acceptance is UNSET else acceptance_check(acceptance)
    branch = None if branch is None else branch_check(branch)

    channel_lock(channel)
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
        store.graph_check(channel=channel, task_id=task_id, depends_on=depends_on)
        if depends_on
        else []
    )
    now = clock.now()
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
    store.dependencies_replace(task, dependencies)
    return audit.task_audit(task, channel=channel, actor=created_by, event="task.created")


def _update(*, channel: Channel, task_id: str, actor: str, changes: dict[str, Any]) -> Task:
    channel_lock(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    if selectors.task_lease(task) is not None:
        lease_update_guard(task, actor=actor, changes=changes)
    else:
        task_owner_guard(task, channel=channel, actor=actor)

    fields: dict[str, Any] = {}
    if "title" in changes:
        fields["title"] = title_check(changes["title"])
    if "status" in changes:
        fields["status"] = status_check(changes["status"])
    if "owner" in changes:
        fields["owner"] = "" if changes["owner"] is None else owner_check(changes["owner"])
    depends_on = depends_on_check(changes["depends_on"]) if "depends_on" in changes else None
    if "files_hint" in changes:
        fields["files_hint"] = files_hint_check(changes["files_hint"])
    if "acceptance" in changes:
        fields["acceptance"] = acceptance_check(changes["acceptance"])
    if "branch" in changes:
        branch = changes["branch"]
        fields["branch"] = "" if branch is None else branch_check(branch)

    new_status = fields.get("status", task.status)
    graph.transition_check(task_id=task.task_id, old_status=task.status, new_status=new_status)
    if depends_on is not None:
        dependencies = store.graph_check(
            channel=channel, task_id=task.task_id, depends_on=depends_on
        )
    else:
        dependencies = store.dependencies_of(task)
    graph.ready_check(
        task_id=task.task_id, new_status=new_status, dependencies=store.statuses(dependencies)
    )

    before = selectors.task_record(task)
    store.task_write(
        task,
        updated_at=clock.now(),
        updated_at_spelling=Task.Spelling.SECONDS,
        **fields,
    )
    if depends_on is not None:
        store.dependencies_replace(task, dependencies)
    return audit.task_audit(
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
    LEASE_MUTATION_REQUIRED. Also TASK_NOT_FOUND, TASK_NOT_OWNER, TASK_INVALID_TRANSITION."""
    return _update(
        channel=channel, task_id=task_id, actor=actor, changes={"status": Status.BLOCKED}
    )
