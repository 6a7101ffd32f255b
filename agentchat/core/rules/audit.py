"""The statuses of the server's own audit messages: the one list.

Every audit message is posted through ``channels_app.services.audit_post``, which refuses an
event that is not named here, so this list is every status the server's audit trail uses (the
task and lease events of tasks_app, the path-lock events of locks_app, channels_app's
``channel.updated`` and the state's ``state.compacted``). A message posted by a client may not
take one of them (``STATUS_RESERVED``): a reader of the channel, the reference CLI's readers and
the state summary among them, would take it for the server's record of a change.
"""

from __future__ import annotations

AUDIT_STATUSES: tuple[str, ...] = (
    # tasks_app: tasks and leases (REFERENCE-CLI §3.13)
    "task.created",
    "task.updated",
    "lease.claimed",
    "lease.renewed",
    "lease.completed",
    "lease.released",
    "lease.recovered",
    "lease.force_released",
    # locks_app: path locks
    "path.locked",
    "path.lock.unlocked",
    "path.lock.recovered",
    "path.lock.force_released",
    # channels_app: a change of topic, members or visibility
    "channel.updated",
    # agentchat.state: a stored summary
    "state.compacted",
)
RESERVED = frozenset(AUDIT_STATUSES)


def is_reserved(status: str) -> bool:
    """Whether a client's ``status`` would read as one of the server's audit statuses (compared
    as the state summary compares statuses: stripped and lowercased)."""
    return status.strip().lower() in RESERVED
