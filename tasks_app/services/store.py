"""The row-level steps every task and lease mutation shares after the channel lock
(``channels_app.locking``): the task's compare-and-set write, dependency rows, and the
database side of the graph checks.

Concurrency. Every mutation first locks the channel row (PostgreSQL; on SQLite
``write_atomic`` already runs one writer at a time), the row the audit message must lock
anyway to allocate its seq. Mutations of one channel's tasks therefore see each other's
committed state, which the dependency graph needs: two updates adding ``A -> B`` and
``B -> A`` concurrently must not both pass the cycle check. Under it, the task row is written
by compare-and-set on ``revision`` and the one-to-one lease row admits one active lease per
task, so a caller that skipped the lock still could not double-claim.

Times: "now" is ``clock.now()`` to the microsecond, and an expiry is that precise now plus
the duration: a 1 s lease taken at xx.95 lasts 1 s (the reference cuts now to the second, so
its lease would have lasted 0.05 s). Expired means ``lease_expires_at <= now``. How a time
is spelled (to the second for task create/update, microseconds for lease operations, as the
reference writes them) is the records' business, not the clock's.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import F

from agentchat.core.rules.errors import AppError
from channels_app.models import Channel
from tasks_app import selectors
from tasks_app.models import Task, TaskDependency
from tasks_app.services import graph


def task_write(task: Task, *, conflict_code: str = "TASK_CONFLICT", **fields: Any) -> None:
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


def dependencies_replace(task: Task, dependencies: Iterable[Task]) -> None:
    TaskDependency.objects.filter(task=task).delete()
    TaskDependency.objects.bulk_create(
        TaskDependency(task=task, dependency=dependency, position=index)
        for index, dependency in enumerate(dependencies)
    )


def dependencies_of(task: Task) -> list[Task]:
    return [link.dependency for link in selectors.task_links(task)]


def statuses(tasks: Iterable[Task]) -> list[tuple[str, str]]:
    """(id, status) pairs, as ``graph.ready_check`` takes them."""
    return [(task.task_id, task.status) for task in tasks]


def graph_check(*, channel: Channel, task_id: str, depends_on: list[str]) -> list[Task]:
    """The dependency rows ``task_id`` would have. Raises TASK_UNKNOWN_DEPENDENCY,
    TASK_DEPENDENCY_CYCLE (``graph.dependencies_check`` on the channel's graph)."""
    tasks = {
        task.task_id: task
        for task in Task.objects.filter(channel=channel).only("id", "task_id", "status")
    }
    edges: dict[str, list[str]] = {}
    rows = TaskDependency.objects.filter(task__channel=channel).order_by("task_id", "position")
    for source, target in rows.values_list("task__task_id", "dependency__task_id"):
        edges.setdefault(source, []).append(target)
    graph.dependencies_check(task_id=task_id, depends_on=depends_on, known=tasks, edges=edges)
    return [tasks[dependency] for dependency in depends_on]
