"""Leases (CLI "task claim / renew / done / release / recover / recover-pending").

Each public function is one ``write_atomic()`` transaction that changes the task, its lease
and the lease history, and posts the audit message in the same transaction.

Check order follows the reference CLI: state before duration (the duration comes parsed at
the boundary as a ``Parsed``, whose refusal is raised only after the state checks); recover
judges the reason first (the boundary parses it before calling); renew/done/release check the
fence the caller sent (STALE_FENCE, before anything about the owner), then the owner, then
expiry; a generic update of a leased task checks expiry, then owner, then the
protected fields (``lease_update_guard``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

from django.db import IntegrityError, transaction

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.fence import fence_check
from agentchat.core.rules.names import check_agent_name
from agentchat.core.rules.parsed import Parsed
from agentchat.core.rules.records import is_expired, seen_changed
from channels_app.locking import channel_lock
from channels_app.models import Channel
from tasks_app import records, selectors
from tasks_app.models import Lease, LeaseHistory, Task
from tasks_app.services import audit, graph, store
from tasks_app.services.ownership import task_owner_guard
from tasks_app.services.validation import lease_expiry

if TYPE_CHECKING:
    from tasks_app.services.tasks import TaskChanges

Status = Task.Status


def _raise_recovery_required(task: Task, lease: Lease) -> NoReturn:
    raise AppError(
        "LEASE_RECOVERY_REQUIRED",
        f"expired lease for task {task.task_id} requires explicit recovery",
        detail={
            "task_id": task.task_id,
            "previous_owner": lease.owner,
            "previous_lease_expires_at": records.lease_ts(lease.lease_expires_at),
        },
    )


def _raise_owner_mismatch(task: Task, lease: Lease, actor: str) -> NoReturn:
    raise AppError(
        "LEASE_OWNER_MISMATCH",
        f"lease for task {task.task_id} belongs to {lease.owner}",
        detail={"task_id": task.task_id, "owner": actor, "current_owner": lease.owner},
    )


def _raise_lease_not_found(task: Task) -> NoReturn:
    raise AppError(
        "LEASE_NOT_FOUND",
        f"no active lease for task {task.task_id}",
        detail={"task_id": task.task_id},
    )


def lease_update_guard(task: Task, *, actor: str, changes: TaskChanges) -> None:
    """A generic update of a leased task: only its owner, while unexpired, and never its
    owner or a status change. Raises LEASE_RECOVERY_REQUIRED, LEASE_OWNER_MISMATCH,
    LEASE_MUTATION_REQUIRED; nothing when the task has no lease."""
    lease = selectors.task_lease(task)
    if lease is None:
        return
    if is_expired(lease.lease_expires_at):
        _raise_recovery_required(task, lease)
    if actor != lease.owner:
        _raise_owner_mismatch(task, lease, actor)
    protected = {"owner"} & set(changes)
    # A status refused by its parse is none of the statuses, so it is a change too.
    status = changes.get("status")
    if status is not None and (status.refused or status.get() != task.status):
        protected.add("status")
    if protected:
        raise AppError(
            "LEASE_MUTATION_REQUIRED",
            f"task {task.task_id} must be changed through its lease operation",
            detail={"task_id": task.task_id, "protected_fields": sorted(protected)},
        )


def task_fence_check(task: Task, fence: int | None) -> None:
    """The fence a holder sent against the task's current one (nothing when none was sent).
    Raises STALE_FENCE."""
    fence_check(fence, task.fence, subject={"task_id": task.task_id})


def _owned_lease(task: Task, actor: str, now: datetime, fence: int | None) -> Lease | None:
    """The caller's unexpired lease, or None when the task has no lease; the fence it sent
    judged first (STALE_FENCE, even when the lease is still the caller's in name)."""
    task_fence_check(task, fence)
    lease = selectors.task_lease(task)
    if lease is None:
        return None
    if lease.owner != actor:
        _raise_owner_mismatch(task, lease, actor)
    if is_expired(lease.lease_expires_at, now):
        _raise_recovery_required(task, lease)
    return lease


def _enter_check(task: Task, new_status: str) -> None:
    """The transition to ``new_status`` and the readiness it needs."""
    graph.transition_check(task_id=task.task_id, old_status=task.status, new_status=new_status)
    graph.ready_check(
        task_id=task.task_id,
        new_status=new_status,
        dependencies=store.statuses(store.dependencies_of(task)),
    )


@dataclass(frozen=True)
class _Mutation:
    """A lease mutation under way: its task, channel, actor and time, and the task's record
    as it was before (what its audit message compares with)."""

    task: Task
    channel: Channel
    actor: str
    now: datetime
    before: dict[str, Any]


def _mutation(task: Task, channel: Channel, actor: str, now: datetime) -> _Mutation:
    return _Mutation(task, channel, actor, now, selectors.task_record(task))


def _lease_start(
    task: Task,
    channel: Channel,
    actor: str,
    now: datetime,
    duration: Parsed[timedelta],
    status: str,
) -> tuple[datetime, _Mutation]:
    """The start of a claim, a renewal or a recovery, in this order: the new expiry
    (``duration`` from ``now``: its refusal first), the task's entry into ``status``, and the
    mutation, its record of the task taken before the lease changes."""
    expires_at = lease_expiry(now, duration.get())
    _enter_check(task, status)
    return expires_at, _mutation(task, channel, actor, now)


def _lease_write(
    op: _Mutation,
    *,
    event: str,
    history: dict[str, Any] | None,
    details: dict[str, Any],
    conflict_code: str = "TASK_CONFLICT",
    **fields: Any,
) -> Task:
    """What every lease mutation ends with, in one place: the task's compare-and-set write
    of ``fields`` stamped ``op.now`` to the microsecond, the lease history row of ``event``
    (``history``: its owner and expiry columns; None, no lease, no row) and the audit message
    with ``details``, the two sharing one transaction id. Returns the reloaded task."""
    task, channel, actor, now, before = op.task, op.channel, op.actor, op.now, op.before
    store.task_write(
        task,
        conflict_code=conflict_code,
        updated_at=now,
        updated_at_spelling=Task.Spelling.MICROSECONDS,
        **fields,
    )
    transaction_id = uuid.uuid4().hex
    if history is not None:
        audit.lease_history_add(
            task, event=event, at=now, actor=actor, transaction_id=transaction_id, **history
        )
    return audit.task_audit(
        task,
        channel=channel,
        actor=actor,
        event=str(event),  # the history's choice, as the plain string the payload carries
        before=before,
        details={**details, "fence": task.fence, "transaction_id": transaction_id},
    )


def _lease_taken(
    op: _Mutation,
    *,
    event: str,
    owner: str,
    expires_at: datetime,
    fence: int,
    details: dict[str, Any],
    history: dict[str, Any] | None = None,
    conflict_code: str = "TASK_CONFLICT",
) -> Task:
    """A claim's or a recovery's end: the task in progress under ``owner`` at ``fence``, its
    history row naming ``owner`` and ``expires_at`` (and ``history``'s columns)."""
    return _lease_write(
        op,
        event=event,
        history={"owner": owner, "lease_expires_at": expires_at, **(history or {})},
        details=details,
        conflict_code=conflict_code,
        owner=owner,
        status=Status.IN_PROGRESS,
        fence=fence,
    )


@write_atomic()
def lease_claim(
    *,
    channel: Channel,
    task_id: str,
    actor: str,
    duration: Parsed[timedelta],
) -> Task:
    """Claim a ready task for ``duration`` (``validation.lease_duration_parse``): ``in_progress``,
    owner and expiry written with the lease row, under the task's next fence; posts
    ``lease.claimed``.

    Raises TASK_NOT_FOUND; LEASE_RECOVERY_REQUIRED (an expired lease is never taken over),
    LEASE_CONFLICT (leased, or assigned to someone else); LEASE_INVALID_DURATION (the refusal
    ``duration`` holds, or an expiry past the calendar); TASK_INVALID_TRANSITION;
    TASK_DEPENDENCY_NOT_READY.
    """
    channel_lock(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    now = clock.now()
    lease = selectors.task_lease(task)
    if lease is not None:
        if is_expired(lease.lease_expires_at, now):
            _raise_recovery_required(task, lease)
        raise AppError(
            "LEASE_CONFLICT",
            f"task {task.task_id} is leased by {lease.owner}",
            detail={
                "task_id": task.task_id,
                "owner": lease.owner,
                "lease_expires_at": records.lease_ts(lease.lease_expires_at),
            },
        )
    if task.owner and task.owner != actor:
        raise AppError(
            "LEASE_CONFLICT",
            f"task {task.task_id} is assigned to {task.owner}",
            detail={"task_id": task.task_id, "owner": task.owner},
        )
    expires_at, op = _lease_start(task, channel, actor, now, duration, Status.IN_PROGRESS)
    fence = task.fence + 1
    try:
        with transaction.atomic():
            Lease.objects.create(
                task=task,
                owner=actor,
                lease_expires_at=expires_at,
                claimed_at=now,
                updated_at=now,
                fence=fence,
            )
    except IntegrityError:  # one active lease per task
        raise AppError(
            "LEASE_CONFLICT",
            f"task {task.task_id} is already leased",
            detail={"task_id": task.task_id},
        ) from None
    return _lease_taken(
        op,
        event=LeaseHistory.Event.CLAIMED,
        owner=actor,
        expires_at=expires_at,
        fence=fence,
        details={"lease_owner": actor},
        conflict_code="LEASE_CONFLICT",
    )


@write_atomic()
def lease_renew(
    *,
    channel: Channel,
    task_id: str,
    actor: str,
    duration: Parsed[timedelta],
    fence: int | None = None,
) -> Task:
    """Extend the caller's unexpired lease to ``now + duration`` (``claimed_at`` and the
    fence kept); posts ``lease.renewed``.

    Raises TASK_NOT_FOUND, STALE_FENCE (``fence`` given and not the task's), LEASE_NOT_FOUND,
    LEASE_OWNER_MISMATCH, LEASE_RECOVERY_REQUIRED, LEASE_INVALID_DURATION (as ``lease_claim``).
    """
    channel_lock(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    now = clock.now()
    lease = _owned_lease(task, actor, now, fence)
    if lease is None:
        _raise_lease_not_found(task)
    expires_at, op = _lease_start(task, channel, actor, now, duration, task.status)
    previous_expiry = lease.lease_expires_at
    Lease.objects.filter(pk=lease.pk).update(lease_expires_at=expires_at, updated_at=now)
    return _lease_write(
        op,
        event=LeaseHistory.Event.RENEWED,
        history={
            "owner": actor,
            "lease_expires_at": expires_at,
            "previous_lease_expires_at": previous_expiry,
        },
        details={"lease_owner": actor},
    )


def _lease_delete(lease: Lease) -> tuple[dict[str, Any], dict[str, Any]]:
    """End ``lease`` (its row deleted): the history columns and audit details every ending
    (done, release, force release) records, its owner and its expiry as they were."""
    previous_expiry = lease.lease_expires_at
    lease.delete()
    history = {
        "owner": lease.owner,
        "lease_expires_at": None,
        "previous_lease_expires_at": previous_expiry,
    }
    details = {
        "lease_owner": lease.owner,
        "previous_lease_expires_at": records.lease_ts(previous_expiry),
    }
    return history, details


def _lease_end(
    *, channel: Channel, task_id: str, actor: str, status: str, fence: int | None
) -> Task:
    """done (``status`` done) and release (``status`` open): with a lease, only its owner
    while unexpired, clearing owner and expiry; without one, a plain transition keeping the
    owner, audited as ``task.updated`` with ``lease_fallback``; an owned task only by its
    owner, creator or the channel's maintainer (TASK_NOT_OWNER)."""
    channel_lock(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    now = clock.now()
    lease = _owned_lease(task, actor, now, fence)
    if lease is None:
        task_owner_guard(task, channel=channel, actor=actor)
    _enter_check(task, status)

    op = _mutation(task, channel, actor, now)
    completing = status == Status.DONE
    if lease is None:
        return _lease_write(
            op,
            event="task.updated",
            history=None,
            details={"lease_fallback": "complete" if completing else "release"},
            status=status,
        )
    history, details = _lease_delete(lease)
    return _lease_write(
        op,
        event=LeaseHistory.Event.COMPLETED if completing else LeaseHistory.Event.RELEASED,
        history=history,
        details=details,
        owner="",
        status=status,
    )


@write_atomic()
def lease_complete(*, channel: Channel, task_id: str, actor: str, fence: int | None = None) -> Task:
    """``task done``: posts ``lease.completed`` (leased) or ``task.updated`` with
    ``lease_fallback: "complete"``. Raises TASK_NOT_FOUND, STALE_FENCE, LEASE_OWNER_MISMATCH,
    LEASE_RECOVERY_REQUIRED, TASK_NOT_OWNER, TASK_INVALID_TRANSITION, TASK_DEPENDENCY_NOT_READY."""
    return _lease_end(
        channel=channel, task_id=task_id, actor=actor, status=Status.DONE, fence=fence
    )


@write_atomic()
def lease_release(*, channel: Channel, task_id: str, actor: str, fence: int | None = None) -> Task:
    """``task release``: posts ``lease.released`` (leased) or ``task.updated`` with
    ``lease_fallback: "release"``. Raises TASK_NOT_FOUND, STALE_FENCE, LEASE_OWNER_MISMATCH,
    LEASE_RECOVERY_REQUIRED, TASK_NOT_OWNER, TASK_INVALID_TRANSITION."""
    return _lease_end(
        channel=channel, task_id=task_id, actor=actor, status=Status.OPEN, fence=fence
    )


def _seen_lease(
    channel: Channel, task_id: str, owner: str | None, expires_at: datetime | None
) -> tuple[Task, Lease]:
    """The task and its lease as the admin saw them (``owner`` and ``expires_at``, when
    given), the channel locked first. Raises TASK_NOT_FOUND, LEASE_NOT_FOUND, TASK_CONFLICT."""
    channel_lock(channel)
    task = selectors.task_get(channel=channel, task_id=task_id)
    lease = selectors.task_lease(task)
    if lease is None:
        _raise_lease_not_found(task)
    _seen_check(task, lease, owner, expires_at)
    return task, lease


def _seen_check(task: Task, lease: Lease, owner: str | None, expires_at: datetime | None) -> None:
    """``seen_changed`` of the lease. Raises TASK_CONFLICT."""
    if seen_changed((lease.owner, lease.lease_expires_at), owner, expires_at):
        raise AppError(
            "TASK_CONFLICT",
            f"the lease of task {task.task_id} changed since it was shown: now held by "
            f"{lease.owner} until {records.lease_ts(lease.lease_expires_at)}; look again",
            detail={
                "task_id": task.task_id,
                "owner": lease.owner,
                "lease_expires_at": records.lease_ts(lease.lease_expires_at),
            },
        )


@write_atomic()
def lease_recover(
    *,
    channel: Channel,
    task_id: str,
    actor: str,
    reason: str,
    duration: Parsed[timedelta],
    owner: str | None = None,
    expected_owner: str | None = None,
    expected_expires_at: datetime | None = None,
) -> Task:
    """Recover an expired lease: ``owner`` (default: ``actor``, who may be the previous
    owner) gets a fresh lease under the task's next fence, recording the previous owner,
    previous expiry and the reason;
    posts ``lease.recovered`` from ``actor`` (who acted: an agent for itself, or the admin for
    ``owner``), with the reference's payload plus ``"actor"`` when the actor is not the new
    owner — the convention recoveries of locks follow too.

    ``reason`` is parsed by the caller (``validation.reason_check``: LEASE_INVALID_REASON,
    which the reference checks first). Raises LEASE_INVALID_OWNER, TASK_NOT_FOUND,
    LEASE_NOT_FOUND, LEASE_NOT_EXPIRED, LEASE_INVALID_DURATION (as ``lease_claim``),
    TASK_INVALID_TRANSITION, TASK_DEPENDENCY_NOT_READY, TASK_CONFLICT (``expected_owner`` /
    ``expected_expires_at`` given, the admin's view, and the lease is no longer that).
    """
    new_owner = check_agent_name(
        actor if owner is None else owner, field="owner", code="LEASE_INVALID_OWNER"
    )
    task, lease = _seen_lease(channel, task_id, expected_owner, expected_expires_at)
    now = clock.now()
    if not is_expired(lease.lease_expires_at, now):
        raise AppError(
            "LEASE_NOT_EXPIRED",
            f"lease for task {task.task_id} is still active",
            detail={
                "task_id": task.task_id,
                "owner": lease.owner,
                "lease_expires_at": records.lease_ts(lease.lease_expires_at),
            },
        )
    expires_at, op = _lease_start(task, channel, actor, now, duration, Status.IN_PROGRESS)
    previous_owner, previous_expiry = lease.owner, lease.lease_expires_at
    fence = task.fence + 1
    Lease.objects.filter(pk=lease.pk).update(
        fence=fence,
        owner=new_owner,
        lease_expires_at=expires_at,
        claimed_at=now,
        updated_at=now,
        previous_owner=previous_owner,
        previous_lease_expires_at=previous_expiry,
        recovery_reason=reason,
    )
    details = {
        "lease_owner": new_owner,
        "previous_owner": previous_owner,
        "previous_lease_expires_at": records.lease_ts(previous_expiry),
        "recovery_reason": reason,
    }
    if actor != new_owner:
        # Someone recovered it for someone else (the admin): the reference's keys stay as
        # they are and name the new owner; ``actor`` says who acted, as the sender does.
        details["actor"] = actor
    return _lease_taken(
        op,
        event=LeaseHistory.Event.RECOVERED,
        owner=new_owner,
        expires_at=expires_at,
        fence=fence,
        details=details,
        history={
            "previous_owner": previous_owner,
            "previous_lease_expires_at": previous_expiry,
            "recovery_reason": reason,
        },
    )


@write_atomic()
def lease_force_release(
    *,
    channel: Channel,
    task_id: str,
    actor: str,
    reason: str,
    expected_owner: str | None = None,
    expected_expires_at: datetime | None = None,
) -> Task:
    """The admin's break-glass: end a task's lease whether or not it has expired, for an
    owner that will never come back (or a lease taken far too long). The task goes back to
    ``open`` with no owner, exactly as if its owner had released it, so anyone may claim it
    next (an admin who wants it to go to someone sets its owner afterwards); the claim record
    is deleted. ``actor`` (the admin) is the sender of the ``lease.force_released`` audit
    message, whose payload is that of ``lease.released`` plus ``actor``, ``reason`` and
    ``lease``, the claim record as it was. The lease history records the admin, the owner who
    lost the lease and the reason.

    ``reason`` is parsed by the caller (``validation.reason_check``: LEASE_INVALID_REASON).
    Raises TASK_NOT_FOUND, LEASE_NOT_FOUND, TASK_CONFLICT (the lease is no longer
    ``expected_owner``'s until ``expected_expires_at``, when given).
    """
    task, lease = _seen_lease(channel, task_id, expected_owner, expected_expires_at)
    now = clock.now()
    # A leased task is in_progress, and in_progress -> open is always allowed: this only
    # refuses a state that the services never write.
    graph.transition_check(task_id=task.task_id, old_status=task.status, new_status=Status.OPEN)

    op = _mutation(task, channel, actor, now)
    lease_as_it_was = selectors.lease_record(lease)
    history, details = _lease_delete(lease)
    return _lease_write(
        op,
        event=LeaseHistory.Event.FORCE_RELEASED,
        history={**history, "recovery_reason": reason},
        details={**details, "lease": lease_as_it_was, "actor": actor, "reason": reason},
        owner="",
        status=Status.OPEN,
        fence=task.fence + 1,  # whoever held it holds a stale fence from now on
    )


def lease_recover_pending(*, channel: Channel) -> NoReturn:
    """Always LEASE_TRANSACTION_NOT_FOUND: every mutation here is one database transaction
    with its audit message, so nothing is ever left pending (the reference's crash markers
    have no counterpart)."""
    raise AppError(
        "LEASE_TRANSACTION_NOT_FOUND",
        "no pending lease transaction exists: the server commits every task and lease "
        "mutation together with its audit message in one database transaction, so there is "
        "never a pending transaction to recover",
        detail={"channel": channel.name},
    )
