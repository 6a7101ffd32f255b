"""Every write of locks_app: lock, unlock, recover — one ``write_atomic()`` transaction each.

Races have one winner by construction. Inside the transaction the channel's lock mutations are
serialized before conflicts are read: on SQLite the whole write transaction is (IMMEDIATE plus
the FIFO writer of ``write_atomic``); on PostgreSQL the channel row is locked first
(``SELECT … FOR UPDATE``; the audit post updates that row anyway, so no new lock order).
The unique (channel, normalized_path) constraint is a database backstop for equal paths.

Each successful mutation posts its audit message (REFERENCE-CLI §3.13) in the same
transaction, so change and audit commit together or not at all. Validation order follows the
reference: identity, then paths or reason, then state (conflict, not found, not stale), then
the duration.
"""

from __future__ import annotations

import contextlib
import math
import uuid
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, transaction

from agentchat.core.db import write_atomic
from agentchat.core.errors import AppError
from agentchat.core.names import check_agent_name
from agentchat.core.paths import safe_text
from channels_app.models import Channel
from channels_app.services import audit_post
from locks_app import selectors
from locks_app.conflicts import ConflictScan
from locks_app.globs import WorkBudget
from locks_app.models import PathLock, PathLockEntry
from locks_app.paths import PathEntry, entry_anchors, paths_normalize

DEFAULT_LEASE_SECONDS = 300.0
REASON_MAX = 1000

EVENT_LOCKED = "path.locked"
EVENT_UNLOCKED = "path.lock.unlocked"
EVENT_RECOVERED = "path.lock.recovered"


def lock_owner_check(owner: Any) -> str:
    """Raises PATH_LOCK_INVALID_OWNER."""
    return check_agent_name(owner, field="owner", code="PATH_LOCK_INVALID_OWNER")


def lock_reason_check(reason: Any) -> str:
    """A non-empty single line without control characters. Raises PATH_LOCK_INVALID_REASON."""
    if not isinstance(reason, str) or not reason.strip():
        raise AppError(
            "PATH_LOCK_INVALID_REASON",
            "recovery reason must not be empty",
            detail={"field": "reason"},
        )
    if any(
        ord(char) < 0x20 or 0x7F <= ord(char) <= 0x9F or 0xD800 <= ord(char) <= 0xDFFF
        for char in reason
    ):
        raise AppError(
            "PATH_LOCK_INVALID_REASON",
            "recovery reason contains a forbidden control character",
            detail={"field": "reason"},
        )
    if len(reason) > REASON_MAX:
        raise AppError(
            "PATH_LOCK_INVALID_REASON",
            f"recovery reason is over {REASON_MAX} characters",
            detail={"field": "reason"},
        )
    return reason


def lock_duration(value: Any) -> float:
    """A positive finite number of seconds (JSON number; not a boolean, string or null).

    Raises PATH_LOCK_INVALID_DURATION.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AppError(
            "PATH_LOCK_INVALID_DURATION",
            "lock duration must be a positive number of seconds",
            detail={"lease_seconds": safe_text(value)},
        )
    try:
        seconds = float(value)
    except OverflowError:
        seconds = math.inf
    if not math.isfinite(seconds) or seconds <= 0:
        raise AppError(
            "PATH_LOCK_INVALID_DURATION",
            "lock duration must be positive",
            detail={"lease_seconds": safe_text(value if math.isfinite(seconds) else str(value))},
        )
    return seconds


def lock_expiry(now: datetime, lease_seconds: Any) -> datetime:
    """``now + lease_seconds``. Raises PATH_LOCK_INVALID_DURATION (also when out of range)."""
    seconds = lock_duration(lease_seconds)
    try:
        return now + timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        raise AppError(
            "PATH_LOCK_INVALID_DURATION",
            "lock duration is outside the supported timestamp range",
            detail={"lease_seconds": seconds},
        ) from None


def _serialize_channel(channel: Channel) -> None:
    # PostgreSQL: later lock mutations of this channel wait here until we commit. SQLite ignores
    # FOR UPDATE; its write transaction is already exclusive.
    Channel.objects.select_for_update().only("pk").get(pk=channel.pk)


def _conflict_error(locks: list[PathLock], now: datetime, operation: str) -> AppError:
    details = [selectors.lock_conflict_to_dict(lock, now) for lock in locks]
    if any(item["expired"] for item in details):
        return AppError(
            "PATH_LOCK_RECOVERY_REQUIRED",
            f"{operation} overlaps an expired lock; recover it explicitly",
            detail={"conflicts": details},
        )
    return AppError(
        "PATH_LOCK_CONFLICT", f"{operation} overlaps an active lock", detail={"conflicts": details}
    )


def _audit(
    event: str,
    record: dict[str, Any],
    *,
    channel: Channel,
    actor: str,
    previous: dict[str, Any] | None = None,
) -> None:
    """Post the audit message of a mutation (REFERENCE-CLI §3.13), inside its transaction."""
    payload: dict[str, Any] = {
        "channel": record["channel"],
        "event": event,
        "expires_at": record["expires_at"],
        "lease_expires_at": record["expires_at"],
        "lock_id": record["lock_id"],
        "owner": record["owner"],
        "paths": record["paths"],
        "transaction_id": uuid.uuid4().hex,
        "updated_at": record["updated_at"],
    }
    if previous is not None:
        payload.update(
            {
                "previous_owner": previous["owner"],
                "previous_expires_at": previous["expires_at"],
                "previous_lease_expires_at": previous["expires_at"],
                "recovery_reason": record["recovery_reason"],
            }
        )
    audit_post(
        channel=channel, actor=actor, event=event, subject=record["lock_id"], payload=payload
    )


def _entry_row(lock: PathLock, position: int, entry: PathEntry) -> PathLockEntry:
    anchor, anchor_folded = entry_anchors(entry.normalized_path)
    return PathLockEntry(
        lock=lock,
        channel_id=lock.channel_id,
        position=position,
        normalized_path=entry.normalized_path,
        display_path=entry.display_path,
        kind=entry.kind,
        anchor=anchor,
        anchor_folded=anchor_folded,
    )


def _entries_create(lock: PathLock, entries: list[PathEntry]) -> None:
    try:
        with transaction.atomic():
            PathLockEntry.objects.bulk_create(
                _entry_row(lock, position, entry) for position, entry in enumerate(entries)
            )
    except IntegrityError:
        raise AppError(
            "PATH_LOCK_CONFLICT",
            "lock request overlaps an active lock",
            detail={"paths": [entry.to_dict() for entry in entries]},
        ) from None


def _reload(lock: PathLock) -> PathLock:
    return selectors.lock_get(channel=lock.channel, lock_id=lock.lock_id)


def lock_acquire(
    *,
    channel: Channel,
    owner: str,
    paths: Any,
    lease_seconds: Any = DEFAULT_LEASE_SECONDS,
) -> PathLock:
    """Lock ``paths`` (all or none) for ``owner`` for ``lease_seconds``; posts ``path.locked``.

    Raises PATH_LOCK_INVALID_OWNER, PATH_LOCK_INVALID_PATH, PATH_LOCK_PATTERN_TOO_COMPLEX (too
    many wildcards in a path, or comparing the paths takes more than the request's work
    budget), PATH_LOCK_CONFLICT (overlap with an active lock, or between the requested paths),
    PATH_LOCK_RECOVERY_REQUIRED (overlap with an expired lock), PATH_LOCK_INVALID_DURATION.
    """
    lock_owner_check(owner)
    budget = WorkBudget()
    entries = paths_normalize(paths, case_insensitive=selectors.case_insensitive(), budget=budget)
    scan = selectors.lock_conflict_scan(channel=channel, entries=entries, budget=budget)
    # The comparisons against what is held now happen here, outside the write transaction;
    # inside, the scan re-reads the candidates and compares only what appeared since.
    scan.run()
    with write_atomic():
        _serialize_channel(channel)
        now = selectors.lock_now()
        conflicts = scan.run()
        if conflicts:
            raise _conflict_error(selectors.locks_by_pk(conflicts), now, "lock request")
        expires_at = lock_expiry(now, lease_seconds)
        lock = PathLock.objects.create(
            lock_id=uuid.uuid4().hex,
            channel=channel,
            owner=owner,
            expires_at=expires_at,
            locked_at=now,
            updated_at=now,
        )
        _entries_create(lock, entries)
        lock = _reload(lock)
        _audit(EVENT_LOCKED, selectors.lock_to_dict(lock), channel=channel, actor=owner)
    return lock


def _target(channel: Channel, lock_id: str | None, path: str | None) -> PathLock:
    if (lock_id is None) == (path is None):
        raise AppError(
            "PATH_LOCK_INVALID_LOCK_ID",
            "name the lock by exactly one of lock id or path",
            detail={"lock_id": safe_text(lock_id), "path": safe_text(path)},
        )
    if lock_id is not None:
        return selectors.lock_get(channel=channel, lock_id=lock_id)
    return selectors.lock_find_by_path(channel=channel, path=path)


def lock_release(
    *, channel: Channel, owner: str, lock_id: str | None = None, path: str | None = None
) -> dict[str, Any]:
    """Unlock a lock named by id or by one of its exact normalized paths; only its owner may,
    expired or not. Removes the whole record and posts ``path.lock.unlocked`` with the record as
    it was, which is returned.

    Raises PATH_LOCK_INVALID_OWNER, PATH_LOCK_INVALID_LOCK_ID, PATH_LOCK_NOT_FOUND,
    PATH_LOCK_CONFLICT (a path held by several records), PATH_LOCK_OWNER_MISMATCH.
    """
    lock_owner_check(owner)
    with write_atomic():
        _serialize_channel(channel)
        lock = _target(channel, lock_id, path)
        if lock.owner != owner:
            raise AppError(
                "PATH_LOCK_OWNER_MISMATCH",
                f"lock {lock.lock_id} belongs to {lock.owner}",
                detail={"lock_id": lock.lock_id, "owner": owner, "current_owner": lock.owner},
            )
        record = selectors.lock_to_dict(lock)
        deleted, _ = PathLock.objects.filter(pk=lock.pk, owner=owner).delete()
        if not deleted:  # compare-and-set, as in lock_recover
            raise AppError("PATH_LOCK_CONFLICT", f"lock {lock.lock_id} changed concurrently")
        _audit(EVENT_UNLOCKED, record, channel=channel, actor=owner)
    return record


def _entries_scan(channel: Channel, lock: PathLock, budget: WorkBudget) -> ConflictScan:
    entries = [PathEntry(e.normalized_path, e.display_path, e.kind) for e in lock.entries.all()]
    return selectors.lock_conflict_scan(
        channel=channel, entries=entries, budget=budget, exclude_lock_pk=lock.pk
    )


def lock_recover(
    *,
    channel: Channel,
    owner: str,
    reason: Any,
    lock_id: str | None = None,
    path: str | None = None,
    lease_seconds: Any = DEFAULT_LEASE_SECONDS,
) -> PathLock:
    """Give an expired lock to ``owner`` with a fresh lease, keeping its id and paths and
    recording the previous owner, previous expiry and the reason; posts
    ``path.lock.recovered``. Anyone may recover, the previous owner included.

    Raises PATH_LOCK_INVALID_OWNER, PATH_LOCK_INVALID_REASON (checked before expiry, as in the
    reference), PATH_LOCK_INVALID_LOCK_ID, PATH_LOCK_NOT_FOUND, PATH_LOCK_NOT_STALE (still
    active), PATH_LOCK_CONFLICT / PATH_LOCK_RECOVERY_REQUIRED (another record overlaps its
    paths), PATH_LOCK_PATTERN_TOO_COMPLEX, PATH_LOCK_INVALID_DURATION.
    """
    lock_owner_check(owner)
    lock_reason_check(reason)
    budget = WorkBudget()
    scan: ConflictScan | None = None
    with contextlib.suppress(AppError):  # judged again, in the reference's order, below
        early = _target(channel, lock_id, path)
        if selectors.lock_is_expired(early):
            # The comparisons outside the write transaction, as in lock_acquire.
            scan = _entries_scan(channel, early, budget)
            scan.run()
    with write_atomic():
        _serialize_channel(channel)
        lock = _target(channel, lock_id, path)
        now = selectors.lock_now()
        if not selectors.lock_is_expired(lock, now):
            raise AppError(
                "PATH_LOCK_NOT_STALE",
                f"lock {lock.lock_id} is still active",
                detail={
                    "lock_id": lock.lock_id,
                    "owner": lock.owner,
                    "expires_at": selectors.lock_timestamp(lock.expires_at),
                },
            )
        if scan is None or scan.exclude_lock_pk != lock.pk:
            scan = _entries_scan(channel, lock, budget)  # (an entry never changes under a lock)
        conflicts = scan.run()
        if conflicts:
            raise _conflict_error(selectors.locks_by_pk(conflicts), now, "recovery request")
        expires_at = lock_expiry(now, lease_seconds)
        previous = selectors.lock_to_dict(lock)
        # Compare-and-set on what was read: a concurrent change (impossible while the channel
        # is serialized, but cheap to rule out) makes this update match nothing.
        updated = PathLock.objects.filter(
            pk=lock.pk, owner=lock.owner, expires_at=lock.expires_at
        ).update(
            owner=owner,
            expires_at=expires_at,
            locked_at=now,
            updated_at=now,
            previous_owner=lock.owner,
            previous_expires_at=lock.expires_at,
            recovery_reason=reason,
        )
        if updated != 1:
            raise AppError("PATH_LOCK_CONFLICT", f"lock {lock.lock_id} changed concurrently")
        lock = _reload(lock)
        _audit(
            EVENT_RECOVERED,
            selectors.lock_to_dict(lock),
            channel=channel,
            actor=owner,
            previous=previous,
        )
    return lock
