"""The status machine and the dependency graph of tasks (CLI document "Task 3"), as pure
functions of ids and statuses: no database, so they are tested on their own and the folder
import can judge a whole folder's graph before it writes anything.

Transitions: ``open -> in_progress | blocked | cancelled``, ``in_progress -> open | blocked |
done | cancelled``, ``blocked -> open | in_progress | cancelled``; ``done`` and ``cancelled``
are terminal; a same-state write is allowed. Entering ``in_progress`` or ``done`` needs every
dependency ``done``. A dependency graph has no cycle.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from agentchat.core.rules.errors import AppError
from tasks_app.models import TaskStatus

Status = TaskStatus
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


def transition_check(*, task_id: str, old_status: str, new_status: str) -> None:
    """Raises TASK_INVALID_TRANSITION."""
    old_status, new_status = str(old_status), str(new_status)
    if new_status not in TRANSITIONS[old_status]:
        raise AppError(
            "TASK_INVALID_TRANSITION",
            f"transition {old_status!r} -> {new_status!r} is not allowed",
            detail={"task_id": task_id, "old_status": old_status, "new_status": new_status},
        )


def ready_check(*, task_id: str, new_status: str, dependencies: Iterable[tuple[str, str]]) -> None:
    """``dependencies``: (id, status) in ``depends_on`` order. Raises
    TASK_DEPENDENCY_NOT_READY when ``new_status`` needs them done and some are not."""
    if new_status not in NEEDS_READY:
        return
    blocked_by = [
        {"id": dependency, "status": str(status)}
        for dependency, status in dependencies
        if status != Status.DONE
    ]
    if blocked_by:
        ids = ", ".join(item["id"] for item in blocked_by)
        raise AppError(
            "TASK_DEPENDENCY_NOT_READY",
            f"task {task_id} depends on unfinished tasks: {ids}",
            detail={"task_id": task_id, "blocked_by": blocked_by},
        )


def dependencies_check(
    *,
    task_id: str,
    depends_on: Sequence[str],
    known: Iterable[str],
    edges: Mapping[str, Sequence[str]],
) -> None:
    """Would ``task_id`` depending on ``depends_on`` keep the graph sound? ``known``: the ids
    of the channel's tasks; ``edges``: their dependency lists (``task_id``'s own is replaced).

    Raises TASK_UNKNOWN_DEPENDENCY, TASK_DEPENDENCY_CYCLE (with the cycle, ``task_id`` first
    and last). The graph was acyclic before, so a new cycle runs through ``task_id``.
    """
    known = set(known)
    for dependency in depends_on:
        if dependency not in known and dependency != task_id:
            raise AppError(
                "TASK_UNKNOWN_DEPENDENCY",
                f"task {task_id} references unknown dependency {dependency}",
                detail={"task_id": task_id, "dependency": dependency},
            )
    graph = {**edges, task_id: depends_on}
    # Depth-first from task_id, iteratively; a path back to it is the cycle. Each node is
    # entered once and remembers who reached it, so the walk and the cycle it reports are
    # linear in the graph (carrying each node's path along was quadratic on a long chain).
    parent: dict[str, str] = {}
    stack = [task_id]
    while stack:
        node = stack.pop()
        for target in graph.get(node, ()):
            if target == task_id:
                cycle = [task_id]
                while node != task_id:
                    cycle.append(node)
                    node = parent[node]
                cycle.append(task_id)
                cycle[1:-1] = reversed(cycle[1:-1])
                raise AppError(
                    "TASK_DEPENDENCY_CYCLE",
                    f"dependency cycle includes task {task_id}",
                    detail={"task_id": task_id, "cycle": cycle},
                )
            if target not in parent:
                parent[target] = node
                stack.append(target)


def graph_cycle(edges: Mapping[str, Sequence[str]]) -> list[str] | None:
    """A cycle of a whole dependency graph (``[a, b, …, a]``), or None when it has none.
    Iterative depth-first search, linear in the graph."""
    visiting, done = 1, 2
    state: dict[str, int] = {}
    for start in sorted(edges):
        if start in state:
            continue
        state[start] = visiting
        path = [start]
        stack = [iter(edges.get(start, ()))]
        while stack:
            target = next(stack[-1], None)
            if target is None:
                state[path.pop()] = done
                stack.pop()
                continue
            seen = state.get(target)
            if seen == visiting:
                return [*path[path.index(target) :], target]
            if seen is None:
                state[target] = visiting
                path.append(target)
                stack.append(iter(edges.get(target, ())))
    return None
