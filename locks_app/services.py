"""Every write of locks_app: lock, unlock, recover, force release — one ``write_atomic()``
transaction each.

Races have one winner by construction. Inside the transaction the channel's lock mutations are
serialized before conflicts are read: on SQLite the whole write transaction is (IMMEDIATE plus
the FIFO writer of ``write_atomic``); on PostgreSQL the channel row is locked first
(``SELECT … FOR UPDATE``; the audit post updates that row anyway, so no new lock order).
The unique (channel, normalized_path) constraint is a database backstop for equal paths.

Each successful mutation posts its audit message (REFERENCE-CLI §3.13) in the same
transaction, so change and audit commit together or not at all.

The services take typed values, parsed at the boundary (the API's views, the admin's forms,
the folder import): a lock's paths normalized (``selectors.lock_paths_parse``), a reason as
text (``lock_reason_check``), a duration as a ``Duration``. Refusals follow the reference's
order: identity, then paths or reason, then state (conflict, not found, not stale), then the
duration: so a ``Duration`` is judged where it is used, and the boundary parses paths and
reasons after the channel and before the service (whose owner, a token's agent, is valid).
The services judge their rules on what they are given again where it costs nothing (the
owner's and the reason's shapes), for callers that parse nothing, such as the admin's forms.

Conflicts are looked up through the anchor index and compared before the write transaction
(``locks_app.conflicts``); inside it, only what appeared in between is compared again.

Times come from the precise clock (``agentchat.core.rules.clock``): a lock of 1 s lasts 1 s, and
lasts at most ``AGENTCHAT_MAX_LEASE_SECONDS`` (``agentchat.core.rules.records.duration_check``).

Who acts and who owns are separate for the admin's actions (the brief's one convention): the
audit message is sent by ``actor`` (``agentchat.core.identity.services.admin_actor`` of the admin),
and its payload adds ``"actor"`` when the actor is not the lock's new owner.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.fence import fence_check
from agentchat.core.rules.names import check_agent_name
from agentchat.core.rules.paths import safe_text
from agentchat.core.rules.records import Duration, expiry_after, is_expired, seen_changed
from agentchat.core.rules.validation import reason_check
from channels_app.locking import channel_lock
from channels_app.models import Channel
from channels_app.services import audit_post
from locks_app import records, selectors
from locks_app.bounds import (
    caps_check,
    conflicts_body,
    conflicts_listed,
    root_count,
    too_many_patterns,
)
from locks_app.conflicts import ConflictScan
from locks_app.globs import WorkBudget
from locks_app.imports import LockImport
from locks_app.models import LockFence, PathLock, PathLockEntry
from locks_app.paths import (
    WORKSPACE,
    LockPaths,
    PathEntry,
    entry_index_keys,
    index_key,
)
from locks_app.records import (
    EVENT_FORCE_RELEASED,
    EVENT_LOCKED,
    EVENT_RECOVERED,
    EVENT_UNLOCKED,
)

DEFAULT_LEASE_SECONDS = 300.0
DEFAULT_DURATION = Duration.parse(DEFAULT_LEASE_SECONDS)
DURATION_CODE = "PATH_LOCK_INVALID_DURATION"


def lock_owner_check(owner: str) -> str:
    """Raises PATH_LOCK_INVALID_OWNER."""
    return check_agent_name(owner, field="owner", code="PATH_LOCK_INVALID_OWNER")


def lock_reason_check(reason: object) -> str:
    """A recovery or force-release reason (``agentchat.core.rules.validation.reason_check``):
    the boundary's parse of one (any JSON value), and the services' check of the text they are
    given (the admin's forms pass it unjudged). Raises PATH_LOCK_INVALID_REASON."""
    return reason_check(reason, code="PATH_LOCK_INVALID_REASON")


def _conflict_error(pks: set[int], now: datetime, operation: str) -> AppError:
    """The 409 of a request overlapping the locks ``pks``: the first of them listed
    (``locks_app.bounds``), RECOVERY_REQUIRED when any of all of them has expired."""
    listed, expired = conflicts_listed(pks, now)
    detail = conflicts_body(listed, len(pks))
    if expired:
        return AppError(
            "PATH_LOCK_RECOVERY_REQUIRED",
            f"{operation} overlaps an expired lock; recover it explicitly",
            detail=detail,
        )
    return AppError("PATH_LOCK_CONFLICT", f"{operation} overlaps an active lock", detail=detail)


def lock_fence_take(channel: Channel) -> int:
    """The channel's next lock fence: one ``INSERT … ON CONFLICT DO UPDATE … RETURNING`` on its
    ``LockFence`` row, which also row-locks it until the transaction ends (PostgreSQL), so two
    acquisitions never get one fence even without the channel lock. Call inside the
    mutation's ``write_atomic()``."""
    table = connection.ops.quote_name(LockFence._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (channel_id, last_fence) VALUES (%s, 1) "
            f"ON CONFLICT (channel_id) DO UPDATE SET last_fence = {table}.last_fence + 1 "
            "RETURNING last_fence",
            [channel.pk],
        )
        return int(cursor.fetchone()[0])


def lock_fences_restore(*, channel: Channel, last: int) -> None:
    """Raise the channel's lock fence counter to ``last`` and to the fence of every lock it
    holds (never lowering it): the folder import's restore of what its sidecar kept
    (``agentchat.folder.fences``). Call inside the import's transaction."""
    held = PathLock.objects.filter(channel=channel).order_by("-fence").first()
    at_least = max(last, held.fence if held is not None else 0)
    if at_least <= 0:
        return
    table = connection.ops.quote_name(LockFence._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (channel_id, last_fence) VALUES (%s, %s) "
            f"ON CONFLICT (channel_id) DO UPDATE SET last_fence = CASE WHEN "
            f"{table}.last_fence < excluded.last_fence THEN excluded.last_fence "
            f"ELSE {table}.last_fence END",
            [channel.pk, at_least],
        )


def _audit(
    event: str,
    lock: PathLock,
    *,
    channel: Channel,
    actor: str,
    record: dict[str, Any] | None = None,
    previous: dict[str, Any] | None = None,
    reason: str | None = None,
) -> None:
    """Post the audit message of a mutation of ``lock`` (REFERENCE-CLI §3.13; its record,
    or ``record`` as it was before an unlock), inside its transaction, sent by ``actor``
    (``records.lock_audit_payload`` says when it is named in the body), with its fence."""
    payload = records.lock_audit_payload(
        event,
        records.lock_to_dict(lock) if record is None else record,
        transaction_id=uuid.uuid4().hex,
        previous=previous,
        actor=actor,
        reason=reason,
        fence=lock.fence,
    )
    audit_post(
        channel=channel, actor=actor, event=event, subject=payload["lock_id"], payload=payload
    )


def _root_patterns_check(channel: Channel, entries: Sequence[PathEntry]) -> None:
    """The folder import's cap: every entry anchored at the workspace that the channel would
    hold, expired or not. Raises PATH_LOCK_TOO_MANY_PATTERNS."""
    wanted = root_count(entries)
    limit = settings.AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS
    held = PathLockEntry.objects.filter(index_key=index_key(channel.pk, WORKSPACE)).count()
    if wanted and held + wanted > limit:
        raise too_many_patterns(held, wanted, limit, scope="channel")


def _entry_row(lock: PathLock, position: int, entry: PathEntry) -> PathLockEntry:
    key, key_folded = entry_index_keys(lock.channel_id, entry.normalized_path)
    return PathLockEntry(
        lock=lock,
        channel_id=lock.channel_id,
        position=position,
        normalized_path=entry.normalized_path,
        display_path=entry.display_path,
        kind=entry.kind,
        index_key=key,
        index_key_folded=key_folded,
    )


def _entries_create(lock: PathLock, entries: Sequence[PathEntry]) -> None:
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


def _seen_check(lock: PathLock, owner: str | None, expires_at: datetime | None) -> None:
    """``seen_changed`` of the lock. Raises PATH_LOCK_CONFLICT."""
    if seen_changed((lock.owner, lock.expires_at), owner, expires_at):
        raise AppError(
            "PATH_LOCK_CONFLICT",
            f"lock {lock.lock_id} changed since it was shown: now owned by {lock.owner}, "
            f"expiring {records.lock_timestamp(lock.expires_at)}; look again",
            detail={
                "lock_id": lock.lock_id,
                "owner": lock.owner,
                "expires_at": records.lock_timestamp(lock.expires_at),
            },
        )


def _reload(lock: PathLock) -> PathLock:
    return selectors.lock_get(channel=lock.channel, lock_id=lock.lock_id)


def lock_acquire(
    *,
    channel: Channel,
    owner: str,
    paths: LockPaths,
    lease_seconds: Duration = DEFAULT_DURATION,
) -> PathLock:
    """Lock ``paths`` (all or none; parsed at the boundary by ``selectors.lock_paths_parse``)
    for ``owner`` for ``lease_seconds``, under the channel's next fence; posts ``path.locked``.

    Raises PATH_LOCK_INVALID_OWNER, PATH_LOCK_PATTERN_TOO_COMPLEX (comparing the paths with the
    held ones takes more than the request's work budget has left), PATH_LOCK_CONFLICT (overlap
    with an active lock), PATH_LOCK_RECOVERY_REQUIRED (overlap with an expired lock),
    PATH_LOCK_TOO_MANY_PATTERNS
    (``owner`` holds ``AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS_PER_AGENT`` entries starting with a
    wildcard, or the channel's unexpired locks ``AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS``:
    ``bounds.caps_check``), PATH_LOCK_TOO_MANY_PATHS (``owner`` holds
    ``AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT`` entries, or the channel's unexpired locks
    ``AGENTCHAT_PATH_LOCK_MAX_PATHS``: ``locks_app.bounds``), PATH_LOCK_INVALID_DURATION.
    """
    lock_owner_check(owner)
    entries = paths.entries
    scan = selectors.lock_conflict_scan(channel=channel, entries=entries, budget=paths.budget)
    # The comparisons against what is held now happen here, outside the write transaction;
    # inside, the scan reads only the entries written since (a range of the primary key).
    scan.run()
    with write_atomic():
        channel_lock(channel)
        now = clock.now()
        conflicts = scan.run()
        if conflicts:
            raise _conflict_error(conflicts, now, "lock request")
        caps_check(channel, entries, owner=owner, now=now)
        expires_at = expiry_after(now, lease_seconds, code=DURATION_CODE)
        lock = PathLock.objects.create(
            lock_id=uuid.uuid4().hex,
            channel=channel,
            owner=owner,
            expires_at=expires_at,
            locked_at=now,
            updated_at=now,
            fence=lock_fence_take(channel),
        )
        _entries_create(lock, entries)
        lock = _reload(lock)
        _audit(EVENT_LOCKED, lock, channel=channel, actor=owner)
    return lock


def _target(channel: Channel, lock_id: str | None, path: str | None) -> PathLock:
    if lock_id is not None and path is None:
        return selectors.lock_get(channel=channel, lock_id=lock_id)
    if path is not None and lock_id is None:
        return selectors.lock_find_by_path(channel=channel, path=path)
    raise AppError(
        "PATH_LOCK_INVALID_LOCK_ID",
        "name the lock by exactly one of lock id or path",
        detail={"lock_id": safe_text(lock_id), "path": safe_text(path)},
    )


def lock_release(
    *,
    channel: Channel,
    owner: str,
    lock_id: str | None = None,
    path: str | None = None,
    fence: int | None = None,
) -> dict[str, Any]:
    """Unlock a lock named by id or by one of its exact normalized paths; only its owner may,
    expired or not, and only with the lock's fence when it sends one. Removes the whole
    record and posts ``path.lock.unlocked`` with the record as it was, which is returned
    with the lock's ``fence``.

    Raises PATH_LOCK_INVALID_OWNER, PATH_LOCK_INVALID_LOCK_ID, PATH_LOCK_NOT_FOUND,
    PATH_LOCK_CONFLICT (a path held by several records), STALE_FENCE (before the owner is
    judged), PATH_LOCK_OWNER_MISMATCH.
    """
    lock_owner_check(owner)
    with write_atomic():
        channel_lock(channel)
        lock = _target(channel, lock_id, path)
        fence_check(fence, lock.fence, subject={"lock_id": lock.lock_id})
        if lock.owner != owner:
            raise AppError(
                "PATH_LOCK_OWNER_MISMATCH",
                f"lock {lock.lock_id} belongs to {lock.owner}",
                detail={"lock_id": lock.lock_id, "owner": owner, "current_owner": lock.owner},
            )
        record = records.lock_to_dict(lock)
        deleted, _ = PathLock.objects.filter(pk=lock.pk, owner=owner).delete()
        if not deleted:  # compare-and-set, as in lock_recover
            raise AppError("PATH_LOCK_CONFLICT", f"lock {lock.lock_id} changed concurrently")
        _audit(EVENT_UNLOCKED, lock, record=record, channel=channel, actor=owner)
    return {**record, "fence": lock.fence}


def _entries_scan(channel: Channel, lock: PathLock, budget: WorkBudget) -> ConflictScan:
    entries = [PathEntry(e.normalized_path, e.display_path, e.kind) for e in lock.entries.all()]
    return selectors.lock_conflict_scan(
        channel=channel, entries=entries, budget=budget, exclude_lock_pk=lock.pk
    )


def lock_recover(
    *,
    channel: Channel,
    owner: str,
    reason: str,
    actor: str | None = None,
    lock_id: str | None = None,
    path: str | None = None,
    lease_seconds: Duration = DEFAULT_DURATION,
    expected_owner: str | None = None,
    expected_expires_at: datetime | None = None,
) -> PathLock:
    """Give an expired lock to ``owner`` with a fresh lease, keeping its id and paths and
    recording the previous owner, previous expiry and the reason, under the channel's next
    fence; posts ``path.lock.recovered``, sent by ``actor`` (default: the owner; an admin
    recovering for someone passes ``admin_actor``, and the payload then names them as
    ``"actor"``). Anyone may recover, the previous owner included.

    Raises PATH_LOCK_INVALID_OWNER, PATH_LOCK_INVALID_REASON (checked before expiry, as in the
    reference), PATH_LOCK_INVALID_LOCK_ID, PATH_LOCK_NOT_FOUND, PATH_LOCK_NOT_STALE (still
    active), PATH_LOCK_CONFLICT / PATH_LOCK_RECOVERY_REQUIRED (another record overlaps its
    paths, or, when ``expected_owner`` / ``expected_expires_at`` are given (the admin: what it
    was shown), the lock is no longer as expected), PATH_LOCK_PATTERN_TOO_COMPLEX,
    PATH_LOCK_TOO_MANY_PATTERNS / PATH_LOCK_TOO_MANY_PATHS (the caps of ``lock_acquire``, for
    ``owner``),
    PATH_LOCK_INVALID_DURATION.
    """
    lock_owner_check(owner)
    reason = lock_reason_check(reason)
    actor = owner if actor is None else actor
    budget = WorkBudget()
    scan: ConflictScan | None = None
    with contextlib.suppress(AppError):  # judged again, in the reference's order, below
        early = _target(channel, lock_id, path)
        if is_expired(early.expires_at):
            # The comparisons outside the write transaction, as in lock_acquire.
            scan = _entries_scan(channel, early, budget)
            scan.run()
    with write_atomic():
        channel_lock(channel)
        lock = _target(channel, lock_id, path)
        _seen_check(lock, expected_owner, expected_expires_at)
        now = clock.now()
        if not is_expired(lock.expires_at, now):
            raise AppError(
                "PATH_LOCK_NOT_STALE",
                f"lock {lock.lock_id} is still active",
                detail={
                    "lock_id": lock.lock_id,
                    "owner": lock.owner,
                    "expires_at": records.lock_timestamp(lock.expires_at),
                },
            )
        if scan is None or scan.exclude_lock_pk != lock.pk:
            scan = _entries_scan(channel, lock, budget)  # (an entry never changes under a lock)
        conflicts = scan.run()
        if conflicts:
            raise _conflict_error(conflicts, now, "recovery request")
        # The recovered lock turns unexpired and changes hands: the caps hold for it as well.
        held = [PathEntry(e.normalized_path, e.display_path, e.kind) for e in lock.entries.all()]
        caps_check(channel, held, owner=owner, now=now, exclude_lock_pk=lock.pk)
        expires_at = expiry_after(now, lease_seconds, code=DURATION_CODE)
        previous = records.lock_to_dict(lock)
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
            fence=lock_fence_take(channel),
        )
        if updated != 1:
            raise AppError("PATH_LOCK_CONFLICT", f"lock {lock.lock_id} changed concurrently")
        lock = _reload(lock)
        _audit(EVENT_RECOVERED, lock, channel=channel, actor=actor, previous=previous)
    return lock


def lock_force_release(
    *,
    channel: Channel,
    lock_id: str,
    actor: str,
    reason: str,
    expected_owner: str | None = None,
    expected_expires_at: datetime | None = None,
) -> dict[str, Any]:
    """The admin's break-glass release: remove a lock, active or expired, whoever owns it.
    Posts ``path.lock.force_released`` sent by ``actor`` (``admin_actor`` of the admin), its
    payload the record as it was (as for an unlock) plus ``"actor"`` and ``"reason"``;
    returns the record as it was.

    Raises PATH_LOCK_INVALID_REASON, PATH_LOCK_INVALID_LOCK_ID, PATH_LOCK_NOT_FOUND,
    PATH_LOCK_CONFLICT (changed concurrently, or no longer owned by ``expected_owner`` until
    ``expected_expires_at`` when they are given: what the admin was shown).
    """
    reason = lock_reason_check(reason)
    with write_atomic():
        channel_lock(channel)
        lock = selectors.lock_get(channel=channel, lock_id=lock_id)
        _seen_check(lock, expected_owner, expected_expires_at)
        record = records.lock_to_dict(lock)
        deleted, _ = PathLock.objects.filter(
            pk=lock.pk, owner=lock.owner, expires_at=lock.expires_at
        ).delete()
        if not deleted:
            raise AppError("PATH_LOCK_CONFLICT", f"lock {lock.lock_id} changed concurrently")
        lock_fence_take(channel)  # a later lock on these paths gets a later fence, as ever
        _audit(
            EVENT_FORCE_RELEASED, lock, record=record, channel=channel, actor=actor, reason=reason
        )
    return record


def locks_import(
    *, channel: Channel, locks: Sequence[LockImport], fences: dict[str, int] | None = None
) -> None:
    """Store a channel's path locks as ``locks_app.imports`` checked them (each record, and no
    overlap between them), in the caller's transaction (the folder import's), with the
    entries' index keys written as every lock's are (``_entry_row``). No audit message is
    posted: the folder's own are imported as they are. Raises PATH_LOCK_CONFLICT (a lock of
    the channel exists already), PATH_LOCK_TOO_MANY_PATTERNS."""
    _root_patterns_check(channel, [entry for lock in locks for entry in lock.entries])
    fences = fences or {}
    try:
        with transaction.atomic():
            # SQLite and PostgreSQL return the new keys from a bulk insert.
            rows = PathLock.objects.bulk_create(
                [
                    PathLock(
                        lock_id=lock.lock_id,
                        channel=channel,
                        owner=lock.owner,
                        expires_at=lock.times["expires_at"],
                        locked_at=lock.times["locked_at"],
                        updated_at=lock.times["updated_at"],
                        previous_owner=lock.previous_owner,
                        previous_expires_at=lock.times["previous_expires_at"],
                        recovery_reason=lock.recovery_reason,
                        spellings=lock.spellings,
                        fence=fences.get(lock.lock_id, 0),
                    )
                    for lock in locks
                ],
                batch_size=500,
            )
            PathLockEntry.objects.bulk_create(
                (
                    _entry_row(row, position, entry)
                    for row, lock in zip(rows, locks, strict=True)
                    for position, entry in enumerate(lock.entries)
                ),
                batch_size=500,
            )
    except IntegrityError:
        raise AppError(
            "PATH_LOCK_CONFLICT",
            f"channel {channel.name!r} holds locks already",
            detail={"channel": channel.name},
        ) from None
