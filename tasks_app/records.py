"""The task and lease records as the reference CLI writes them (REFERENCE-CLI §3.7-3.8): the
API returns them and the folder renderer of the sync writes ``tasks/<id>.json`` and
``claims/<task>.<owner>.json`` from them, so both give the same bytes from one definition.

Pure: the functions read the fields of the instances they are given and the values passed
beside them, never the database (the caller loads the channel name, the dependency ids and
the lease; ``tasks_app.selectors.task_record`` does for the API).

Spellings, as the reference writes them: a task's ``updated_at`` to the second after a task
create or update (``2026-11-29T15:46:20+00:00``) and to the microsecond after a lease operation
(``2026-11-29T15:46:19.000000+00:00``), which ``Task.updated_at_spelling`` remembers; every
lease time to the microsecond. The stored times are precise; a spelling to the second drops
the fraction (it never rounds up). The spellings themselves are the floor's
(``agentchat.core.rules.records``), shared with locks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentchat.core.rules.records import row_time, ts_micros, ts_seconds, ts_spelled
from tasks_app.models import Lease, Task

# The reference's tasks/<id>.json keys, in its order (not sorted).
TASK_FIELDS = (
    "id",
    "channel",
    "title",
    "status",
    "owner",
    "created_by",
    "depends_on",
    "files_hint",
    "acceptance",
    "lease_expires_at",
    "branch",
    "updated_at",
)
# The reference's claims/<task>.<owner>.json keys, in its order (not sorted).
LEASE_FIELDS = (
    "task_id",
    "channel",
    "owner",
    "lease_expires_at",
    "claimed_at",
    "updated_at",
    "previous_owner",
    "previous_lease_expires_at",
    "recovery_reason",
)


def lease_ts(value: datetime | None) -> str | None:
    """A lease time as the reference spells it (microseconds); None stays None."""
    return None if value is None else ts_micros(value)


def lease_time(lease: Lease, field: str) -> str | None:
    """One of a lease's times in its record (``row_time``)."""
    return row_time(lease, field)


def task_updated_at(task: Task) -> str:
    spell = ts_micros if task.updated_at_spelling == Task.Spelling.MICROSECONDS else ts_seconds
    return ts_spelled(task.updated_at, task.spellings, "updated_at", spell)


def task_record(
    task: Task, *, channel: str, depends_on: Sequence[str], lease: Lease | None
) -> dict[str, Any]:
    """The reference's task record: exactly its 12 keys, in its order. ``lease_expires_at`` is
    the lease's, so the task and its claim record spell it identically (the reference checks
    that they are string-equal)."""
    return {
        "id": task.task_id,
        "channel": channel,
        "title": task.title,
        "status": str(task.status),
        "owner": task.owner or None,
        "created_by": task.created_by,
        "depends_on": list(depends_on),
        "files_hint": list(task.files_hint),
        "acceptance": list(task.acceptance),
        "lease_expires_at": lease_time(lease, "lease_expires_at") if lease is not None else None,
        "branch": task.branch or None,
        "updated_at": task_updated_at(task),
    }


def lease_record(lease: Lease, *, task_id: str, channel: str) -> dict[str, Any]:
    """The reference's claim record: exactly its 9 keys, in its order."""
    return {
        "task_id": task_id,
        "channel": channel,
        "owner": lease.owner,
        "lease_expires_at": lease_time(lease, "lease_expires_at"),
        "claimed_at": lease_time(lease, "claimed_at"),
        "updated_at": lease_time(lease, "updated_at"),
        "previous_owner": lease.previous_owner or None,
        "previous_lease_expires_at": lease_time(lease, "previous_lease_expires_at"),
        "recovery_reason": lease.recovery_reason or None,
    }


def task_path(record: dict[str, Any]) -> str:
    """Where the reference keeps a task record, relative to the channel folder."""
    return f"tasks/{record['id']}.json"


def lease_path(record: dict[str, Any]) -> str:
    """Where the reference keeps a claim record, relative to the channel folder."""
    return f"claims/{record['task_id']}.{record['owner']}.json"


def record_text(record: dict[str, Any]) -> str:
    """A task or claim record's file content, as the reference writes it: 2-space indent,
    non-ASCII kept, keys in the record's order, one final newline."""
    return json.dumps(record, indent=2, ensure_ascii=False) + "\n"
