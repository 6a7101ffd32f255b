"""Every write of tasks_app: tasks, dependencies and leases (CLI "task" commands).

Each public function is one ``write_atomic()`` transaction that changes the task, its lease
and the lease history, and posts the audit message (``channels_app.services.audit_post``)
in the same transaction: the change and its audit commit together or not at all, so there is
never a pending transaction to recover.

The package, along its seams:

- ``validation``: the reference's record rules for each value, with the field's code;
- ``graph``: the status machine and the dependency graph, pure (no database);
- ``store``: the row-level steps every mutation shares (channel lock, compare-and-set, "now");
- ``audit``: the audit message of a mutation and the lease history rows;
- ``tasks``: create, update, block; ``leases``: claim, renew, done, release, recover;
- ``imports``: tasks and leases from a reference folder (the folder import).

Public names are imported here, so callers (the API views, the admin) use
``tasks_app.services.<name>``. The services take parsed values: the API's input shapes
(``tasks_app.api.serializers``) and the admin parse a request with ``validation``'s checks,
and a value the reference judges only after the state it acts on (a lease's duration, an
update's fields) comes as a ``Parsed`` holding its refusal (``agentchat.core.rules.parsed``).
"""

from __future__ import annotations

from tasks_app.services.graph import NEEDS_READY, TRANSITIONS
from tasks_app.services.imports import task_fences_restore, tasks_import
from tasks_app.services.leases import (
    lease_claim,
    lease_complete,
    lease_force_release,
    lease_recover,
    lease_recover_pending,
    lease_release,
    lease_renew,
)
from tasks_app.services.tasks import TaskChanges, task_block, task_create, task_update
from tasks_app.services.validation import (
    DEFAULT_LEASE_SECONDS,
    RESERVED_TASK_IDS,
    lease_expiry,
)

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "NEEDS_READY",
    "RESERVED_TASK_IDS",
    "TRANSITIONS",
    "TaskChanges",
    "lease_claim",
    "lease_complete",
    "lease_expiry",
    "lease_force_release",
    "lease_recover",
    "lease_recover_pending",
    "lease_release",
    "lease_renew",
    "task_block",
    "task_create",
    "task_fences_restore",
    "task_update",
    "tasks_import",
]
