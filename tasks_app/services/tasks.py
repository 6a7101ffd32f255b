"""Tasks (CLI "task create / update / block"): each public function is one
``write_atomic()`` transaction that writes the task and its dependency rows and posts the
audit message in the same transaction."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict, cast

from django.db import IntegrityError, transaction
from django.db.models.functions import Lower

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.parsed import Parsed
from channels_app.locking import channel_lock
from channels_app.models import Channel
from tasks_app import selectors
from tasks_app.models import Task
from tasks_app.services import audit, graph, store
from tasks_app.services.leases import lease_update_guard
from tasks_app.services.ownership import task_owner_guard

Status = Task.Status


class TaskChanges(TypedDict, total=False):
    """The fields of a generic update, parsed where the request entered
    (``tasks_app.api.serializers.TaskUpdateInput.parse``): a key present is a change, a list
    replaces the stored one, ``None`` clears owner or branch. A value whose parse failed holds
    its refusal, which ``task_update`` raises where the reference judges values: once the
    task is found and the caller may change it, in the order of the keys below."""

    title: Parsed[str]
    status: Parsed[str]
    owner: Parsed[str | None]
    depends_on: Parsed[list[str]]
    files_hint: Parsed[list[str]]
    acceptance: Parsed[list[str]]
    branch: Parsed[str | None]


@write_atomic()
def task_create(
    *,
    channel: Channel,
    task_id: str,
    title: str,
    created_by: str,
    owner: str | None = None,
    depends_on: Sequence[str] = (),
    files_hint: Sequence[str] = (),
    acceptance: Sequence[str] = (),
    branch: str | None = None,
) -> Task:
    """Create an open task and post ``task.created``. The values are parsed by the caller
    (``tasks_app.api.serializers.TaskCreateInput.parse``: TASK_INVALID_ID and the other value
    codes, in the reference's order).

    Raises TASK_ALREADY_EXISTS (ids are unique case-insensitively), TASK_UNKNOWN_DEPENDENCY,
    TASK_DEPENDENCY_CYCLE (a task depending on itself).
    """
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
        store.graph_check(channel=channel, task_id=task_id, depends_on=list(depends_on))
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
                files_hint=list(files_hint),
                acceptance=list(acceptance),
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


def _update(*, channel: Channel, task_id: str, actor: str, changes: TaskChanges) -> Task:
    channel_lock(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    if selectors.task_lease(task) is not None:
        lease_update_guard(task, actor=actor, changes=changes)
    else:
        task_owner_guard(task, channel=channel, actor=actor)

    # The values' refusals, in the reference's order (``TaskChanges``).
    # ``TaskChanges``'s keys in their declared order; ``None`` clears owner or branch ("").
    given = cast("Mapping[str, Parsed[Any]]", changes)
    fields: dict[str, Any] = {
        key: given[key].get() for key in TaskChanges.__annotations__ if key in given
    }
    depends_on = fields.pop("depends_on", None)
    for key in ("owner", "branch"):
        if key in fields:
            fields[key] = fields[key] or ""

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
def task_update(*, channel: Channel, task_id: str, actor: str, changes: TaskChanges) -> Task:
    """Generic update of ``changes`` (parsed by the caller:
    ``tasks_app.api.serializers.TaskUpdateInput.parse``, which refuses an update that changes
    nothing, TASK_INVALID_UPDATE); posts one ``task.updated``, also for a same-state write.

    Raises TASK_INVALID_ID, TASK_NOT_FOUND; on a leased task LEASE_RECOVERY_REQUIRED
    (expired), LEASE_OWNER_MISMATCH, LEASE_MUTATION_REQUIRED (owner or a status change), on
    an owned one TASK_NOT_OWNER; then the refusals ``changes`` holds (TASK_INVALID_TITLE,
    TASK_INVALID_STATUS, TASK_INVALID_OWNER, TASK_INVALID_DEPENDS_ON,
    TASK_INVALID_DEPENDENCY_ID, TASK_DUPLICATE_DEPENDENCY, TASK_INVALID_FILES_HINT,
    TASK_PATH_OUTSIDE_WORKSPACE, TASK_INVALID_ACCEPTANCE, TASK_INVALID_BRANCH,
    FIELD_TOO_LARGE); then TASK_INVALID_TRANSITION, TASK_UNKNOWN_DEPENDENCY,
    TASK_DEPENDENCY_CYCLE, TASK_DEPENDENCY_NOT_READY.
    """
    return _update(channel=channel, task_id=task_id, actor=actor, changes=changes)


@write_atomic()
def task_block(*, channel: Channel, task_id: str, actor: str) -> Task:
    """``open``/``in_progress``/``blocked`` -> ``blocked``, posting ``task.updated``. A leased
    task cannot be blocked: LEASE_RECOVERY_REQUIRED, LEASE_OWNER_MISMATCH or, for its owner,
    LEASE_MUTATION_REQUIRED. Also TASK_NOT_FOUND, TASK_NOT_OWNER, TASK_INVALID_TRANSITION."""
    return _update(
        channel=channel, task_id=task_id, actor=actor, changes={"status": Parsed.ok(Status.BLOCKED)}
    )
