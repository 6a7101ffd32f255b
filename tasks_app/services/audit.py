"""The audit trail of tasks and leases: the channel's audit message of every mutation
(REFERENCE-CLI §3.13 with its correction) and the lease history rows.

Both are written inside the mutation's transaction (``channels_app.services.audit_post``
allocates the message's seq there), so a change and its audit commit together or not at all.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from channels_app.models import Channel
from channels_app.services import audit_post
from tasks_app import selectors
from tasks_app.models import LeaseHistory, Task


def task_audit(
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


def lease_history_add(
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
