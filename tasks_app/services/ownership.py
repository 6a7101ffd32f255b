"""Who may change a task that has an owner and no lease.

The reference CLI lets any agent rename, re-assign, clear, block, cancel, release or complete
an assigned task: its files protect nothing. Here an owned task is changed only by its owner,
its creator (who assigned it) or the channel's maintainer; anyone else gets TASK_NOT_OWNER
(403) and nothing changes. A task with no owner stays everyone's, as in the reference; a
leased task follows the lease rules (only the lease's owner, ``leases.lease_update_guard``),
and an expired lease is still recovered by anyone, explicitly and with a reason.
"""

from __future__ import annotations

from agentchat.core.rules.errors import AppError
from channels_app.models import Channel
from tasks_app.models import Task


def task_deciders(task: Task, channel: Channel) -> list[str]:
    """The agents who may change ``task`` while it is owned and unleased, in a stable order."""
    return list(
        dict.fromkeys(name for name in (task.owner, task.created_by, channel.maintainer) if name)
    )


def task_owner_guard(task: Task, *, channel: Channel, actor: str) -> None:
    """Raises TASK_NOT_OWNER when ``task`` has an owner and ``actor`` is none of its deciders.
    The caller has already applied the lease rules (a leased task never reaches here)."""
    if not task.owner:
        return
    allowed = task_deciders(task, channel)
    if actor in allowed:
        return
    raise AppError(
        "TASK_NOT_OWNER",
        f"task {task.task_id} is owned by {task.owner}: only its owner, its creator or the "
        "channel's maintainer may change it",
        detail={"task_id": task.task_id, "owner": task.owner, "actor": actor, "allowed": allowed},
    )
