"""Every read of tasks_app. The record shapes and their spellings are ``tasks_app.records``
(pure); ``task_record`` / ``lease_record`` here hand it a loaded task's relations."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.db.models import F, IntegerField, OuterRef, QuerySet, Subquery, Sum

from agentchat.core.http import pages
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.fence import fence_state
from agentchat.core.rules.names import RECORD_ID_RE, check_agent_name
from agentchat.core.rules.records import is_expired
from channels_app.models import Channel
from tasks_app import records
from tasks_app.models import TASK_ID_MAX, Lease, LeaseHistory, Task, TaskDependency

TASK_FIELDS = records.TASK_FIELDS
STATUSES = tuple(choice.value for choice in Task.Status)


def task_id_check(value: object, *, field: str = "id", code: str = "TASK_INVALID_ID") -> str:
    """Raises TASK_INVALID_ID (or ``code``): ``[A-Za-z0-9][A-Za-z0-9._-]*`` as a whole string
    (no trailing newline, ASCII letters and digits only), at most 128. The value is echoed in
    the error cut to 100 characters."""
    if not isinstance(value, str) or not value.strip():
        raise AppError(code, f"{field} must not be empty", detail={"field": field})
    if len(value) > TASK_ID_MAX:
        raise AppError(
            code,
            f"{field} must be at most {TASK_ID_MAX} characters",
            detail={"field": field, "value": value[:100]},
        )
    if not RECORD_ID_RE.fullmatch(value):
        raise AppError(
            code,
            f"{field} must contain only letters, digits, '.', '_' or '-'",
            detail={"field": field, "value": value[:100]},
        )
    return value


def _loaded(queryset: QuerySet[Task]) -> list[Task]:
    """The tasks with their channel and lease (one join) and their dependency links in
    ``depends_on`` order (one more query for all of them), kept on ``task.links``. A
    ``Prefetch`` did the same at twice the CPU (1.3 ms more per task on this machine kind)."""
    tasks = list(queryset.select_related("channel", "lease"))
    by_task: dict[int, list[TaskDependency]] = {task.pk: [] for task in tasks}
    if tasks:
        links = (
            TaskDependency.objects.filter(task__in=list(by_task))
            .select_related("dependency")
            .order_by("position")
        )
        for link in links:
            by_task[link.task_id].append(link)
    for task in tasks:
        task.links = by_task[task.pk]
    return tasks


def task_links(task: Task) -> list[TaskDependency]:
    """The task's dependency links in ``depends_on`` order (loaded with it when it can be)."""
    links = getattr(task, "links", None)
    if links is None:
        links = task.links = list(
            task.dependency_links.select_related("dependency").order_by("position")
        )
    return links


def task_get(*, channel: Channel, task_id: str) -> Task:
    """Raises TASK_INVALID_ID, TASK_NOT_FOUND. Ids are looked up exactly, as the reference
    looks up a file name."""
    task_id_check(task_id)
    found = _loaded(Task.objects.filter(channel=channel, task_id=task_id))
    task = found[0] if found else None
    if task is None:
        raise AppError(
            "TASK_NOT_FOUND",
            f"task record does not exist: {task_id}",
            detail={"task_id": task_id},
        )
    return task


def _tasks_filtered(*, channel: Channel, status: str | None, owner: str | None) -> QuerySet[Task]:
    """Raises TASK_INVALID_STATUS, TASK_INVALID_OWNER (a filter no task can match is a
    mistake, and a NUL would reach the database)."""
    queryset = Task.objects.filter(channel=channel)
    if status is not None:
        if status not in STATUSES:
            raise AppError(
                "TASK_INVALID_STATUS",
                f"unknown task status: {status[:100]!r}",
                detail={"field": "status", "value": status[:100]},
            )
        queryset = queryset.filter(status=status)
    if owner is not None:
        check_agent_name(owner, field="owner", code="TASK_INVALID_OWNER")
        queryset = queryset.filter(owner=owner)
    return queryset


def task_list(
    *, channel: Channel, status: str | None = None, owner: str | None = None
) -> list[Task]:
    """Every task of a channel by id, optionally filtered (the whole list: for the folder and
    the state summary; the API pages with ``task_page``). Raises TASK_INVALID_STATUS,
    TASK_INVALID_OWNER."""
    return _loaded(_tasks_filtered(channel=channel, status=status, owner=owner).order_by("task_id"))


def tasks_iter(*, channel: Channel, chunk_size: int = 500) -> Iterator[Task]:
    """Every task of a channel by id, loaded as ``task_list`` loads them but ``chunk_size`` at
    a time (the state summary walks a channel's tasks without holding them all)."""
    after: str | None = None
    while True:
        rows = Task.objects.filter(channel=channel)
        if after is not None:
            rows = rows.filter(task_id__gt=after)
        batch = _loaded(rows.order_by("task_id")[:chunk_size])
        yield from batch
        if len(batch) < chunk_size:
            return
        after = batch[-1].task_id


# Dependencies as the record spells them twice (``depends_on`` and ``blocked_by``).
_DEPENDENCIES_SIZE = Subquery(
    TaskDependency.objects.filter(task=OuterRef("pk"))
    .order_by()
    .values("task")
    .annotate(n=Sum(pages.OctetLength(F("dependency__task_id")) * 2 + 40))
    .values("n"),
    output_field=IntegerField(),
)
# A task's planned size in a list: what can be big (title, acceptance, files_hint, branch, a
# recovery reason, the dependencies), plus the fixed fields of the task and its lease.
TASK_SIZE = pages.size_of(
    "title",
    "acceptance",
    "files_hint",
    "branch",
    "lease__recovery_reason",
    _DEPENDENCIES_SIZE,
    overhead=768,
)


def task_page(
    *,
    channel: Channel,
    status: str | None = None,
    owner: str | None = None,
    after: str | None = None,
    limit: int = pages.LIST_LIMIT_MAX,
) -> pages.ListPage:
    """A page of a channel's tasks (``task_to_dict``) after the id ``after``, by id, optionally
    filtered (``agentchat.core.http.pages``): a task can hold 1,000 acceptance lines, so the page is
    planned from sizes the database computes and loads only the tasks it sends. Raises
    TASK_INVALID_STATUS, TASK_INVALID_OWNER."""
    return pages.list_page(
        _tasks_filtered(channel=channel, status=status, owner=owner),
        key="task_id",
        size=TASK_SIZE,
        window=pages.PageWindow(after, limit),
        load=_loaded,
        render=task_to_dict,
    )


def task_after_check(value: str) -> None:
    """``?after=`` of the task list: a task id by the rule of ids. Raises TASK_INVALID_ID."""
    task_id_check(value, field="after")


def task_depends_on(task: Task) -> list[str]:
    return [link.dependency.task_id for link in task_links(task)]


def task_lease(task: Task) -> Lease | None:
    try:
        return task.lease
    except Lease.DoesNotExist:
        return None


def task_record(task: Task) -> dict[str, Any]:
    """The reference's task record of a loaded task (``records.task_record``)."""
    return records.task_record(
        task,
        channel=task.channel.name,
        depends_on=task_depends_on(task),
        lease=task_lease(task),
    )


def lease_record(lease: Lease) -> dict[str, Any]:
    """The reference's claim record of a lease (``records.lease_record``)."""
    return records.lease_record(lease, task_id=lease.task.task_id, channel=lease.task.channel.name)


def task_blocked_by(task: Task) -> list[dict[str, str]]:
    """Dependencies that are not done, in ``depends_on`` order."""
    return [
        {"id": link.dependency.task_id, "status": link.dependency.status}
        for link in task_links(task)
        if link.dependency.status != Task.Status.DONE
    ]


def task_to_dict(task: Task) -> dict[str, Any]:
    """The API shape: the task record plus ``lease``, ``ready`` and ``blocked_by``."""
    lease = task_lease(task)
    blocked_by = task_blocked_by(task)
    return {
        **task_record(task),
        "fence": task.fence,
        "lease": lease_record(lease) if lease else None,
        "ready": not blocked_by,
        "blocked_by": blocked_by,
    }


def task_fence_state(task: Task, fence: int) -> dict[str, Any]:
    """Whether ``fence`` is the task's current one (``agentchat.core.rules.fence``): the
    answer of ``GET …/tasks/<id>/fence/``."""
    lease = task_lease(task)
    live = (
        lease is not None and lease.fence == task.fence and not is_expired(lease.lease_expires_at)
    )
    return {
        "task_id": task.task_id,
        "fence": task.fence,
        "checked": fence,
        "state": fence_state(fence, task.fence, live=live),
        "owner": lease.owner if lease else None,
        "expires_at": records.lease_ts(lease.lease_expires_at) if lease else None,
    }


def tasks_to_dicts(tasks: Iterable[Task]) -> list[dict[str, Any]]:
    return [task_to_dict(task) for task in tasks]


def leases_among(channels: QuerySet[Channel], *, limit: int) -> list[Lease]:
    """The leases held on tasks of ``channels`` (a queryset: the viewer's visible channels),
    soonest expiry first (expired ones lead), with their task and channel: one query, at most
    ``limit`` rows (the overview's "what each agent is doing")."""
    return list(
        Lease.objects.filter(task__channel__in=channels)
        .select_related("task", "task__channel")
        .order_by("lease_expires_at", "pk")[:limit]
    )


def tasks_completed_by(*, channel: Channel, task_ids: Iterable[str]) -> dict[str, str]:
    """Who completed each done task of ``task_ids`` (the actor of its latest lease completion),
    by task id; a task marked done without a lease is absent. One query."""
    rows = (
        LeaseHistory.objects.filter(
            task__channel=channel,
            task__task_id__in=list(task_ids),
            event=LeaseHistory.Event.COMPLETED,
        )
        .order_by("at", "pk")
        .values_list("task__task_id", "actor")
    )
    return dict(rows)  # the latest wins


def leases_expired_among(channels: QuerySet[Channel], *, limit: int) -> list[Lease]:
    """The expired leases on tasks of ``channels``, longest expired first: one query over the
    expiry index, at most ``limit`` (what waits for a human to recover or release)."""
    return list(
        Lease.objects.filter(task__channel__in=channels, lease_expires_at__lte=clock.now())
        .select_related("task", "task__channel")
        .order_by("lease_expires_at", "pk")[:limit]
    )
