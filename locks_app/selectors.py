"""Every read of locks_app: lock records, conflicts, lookups by id or path.

A lock record is serialized by ``lock_to_dict`` exactly as the reference writes
``locks/<lock_id>.json`` (REFERENCE-CLI §3.9): the same keys, timestamps with microseconds and
``+00:00``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db.models import Prefetch, QuerySet

from agentchat.core import clock
from agentchat.core.errors import AppError
from agentchat.core.names import is_record_id
from agentchat.core.paths import safe_text
from channels_app.models import Channel
from locks_app.globs import paths_overlap
from locks_app.models import PathLock, PathLockEntry
from locks_app.paths import PathEntry, match_key, path_normalize, paths_normalize

LOCK_ID_MAX = 64


def case_insensitive() -> bool:
    return bool(settings.AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE)


def lock_now() -> datetime:
    """Now, to the second, as the reference's lock clock (so stored times end in .000000)."""
    return clock.now().astimezone(UTC).replace(microsecond=0)


def lock_timestamp(value: datetime | None) -> str | None:
    """The one spelling of lock times: ``2026-11-29T15:46:20.000000+00:00``."""
    if value is None:
        return None
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def lock_is_expired(lock: PathLock, now: datetime | None = None) -> bool:
    """Expired when ``expires_at <= now`` (the reference's comparison)."""
    return lock.expires_at <= (now or lock_now())


def lock_paths(lock: PathLock) -> list[dict[str, str]]:
    return [
        {
            "display_path": entry.display_path,
            "kind": entry.kind,
            "normalized_path": entry.normalized_path,
        }
        for entry in sorted(lock.entries.all(), key=lambda entry: entry.position)
    ]


def lock_to_dict(lock: PathLock) -> dict[str, Any]:
    """The lock record (REFERENCE-CLI §3.9), keys sorted as in the reference's file."""
    return {
        "channel": lock.channel.name,
        "expires_at": lock_timestamp(lock.expires_at),
        "lock_id": lock.lock_id,
        "locked_at": lock_timestamp(lock.locked_at),
        "owner": lock.owner,
        "paths": lock_paths(lock),
        "previous_expires_at": lock_timestamp(lock.previous_expires_at),
        "previous_owner": lock.previous_owner,
        "recovery_reason": lock.recovery_reason,
        "updated_at": lock_timestamp(lock.updated_at),
    }


def lock_conflict_to_dict(lock: PathLock, now: datetime) -> dict[str, Any]:
    """One entry of a check result or a conflict error (the reference's conflict details)."""
    return {
        "lock_id": lock.lock_id,
        "owner": lock.owner,
        "expires_at": lock_timestamp(lock.expires_at),
        "expired": lock_is_expired(lock, now),
        "paths": lock_paths(lock),
    }


def _locks(channel: Channel) -> QuerySet[PathLock]:
    entries = Prefetch("entries", queryset=PathLockEntry.objects.order_by("position"))
    return (
        PathLock.objects.filter(channel=channel)
        .select_related("channel")
        .prefetch_related(entries)
        .order_by("lock_id")
    )


def lock_list(*, channel: Channel) -> list[PathLock]:
    """Every lock of the channel, active and expired, by lock id."""
    return list(_locks(channel))


def locks_overlapping(
    *, channel: Channel, entries: Iterable[PathEntry], exclude_lock_id: str | None = None
) -> list[PathLock]:
    """Locks of the channel (active or expired) with a path overlapping one of ``entries``."""
    folded = case_insensitive()
    wanted = [match_key(entry.normalized_path, case_insensitive=folded) for entry in entries]
    result = []
    for lock in _locks(channel):
        if lock.lock_id == exclude_lock_id:
            continue
        held = [match_key(e.normalized_path, case_insensitive=folded) for e in lock.entries.all()]
        if any(paths_overlap(left, right) for left in wanted for right in held):
            result.append(lock)
    return result


def lock_check(*, channel: Channel, paths: Any) -> list[dict[str, Any]]:
    """Every lock record overlapping ``paths``, expired ones included (flagged ``expired``).

    Raises PATH_LOCK_INVALID_PATH, PATH_LOCK_CONFLICT (two requested paths overlap, as in the
    reference, whose check normalizes like lock).
    """
    entries = paths_normalize(paths, case_insensitive=case_insensitive())
    now = lock_now()
    return [
        lock_conflict_to_dict(lock, now)
        for lock in locks_overlapping(channel=channel, entries=entries)
    ]


def lock_id_check(lock_id: Any) -> str:
    """Raises PATH_LOCK_INVALID_LOCK_ID unless ``lock_id`` is a record id (uuid hex here; an
    imported folder may carry any ``[A-Za-z0-9][A-Za-z0-9._-]*``)."""
    if not is_record_id(lock_id, max_length=LOCK_ID_MAX):
        raise AppError(
            "PATH_LOCK_INVALID_LOCK_ID",
            "lock id must match [A-Za-z0-9][A-Za-z0-9._-]* and be at most 64 characters",
            detail={"lock_id": safe_text(lock_id)},
        )
    return lock_id


def _not_found(target: Any) -> AppError:
    return AppError(
        "PATH_LOCK_NOT_FOUND",
        f"lock record does not exist: {safe_text(target, 200)}",
        detail={"target": safe_text(target)},
    )


def lock_get(*, channel: Channel, lock_id: Any) -> PathLock:
    """Raises PATH_LOCK_INVALID_LOCK_ID, PATH_LOCK_NOT_FOUND."""
    lock_id_check(lock_id)
    lock = _locks(channel).filter(lock_id=lock_id).first()
    if lock is None:
        raise _not_found(lock_id)
    return lock


def lock_find_by_path(*, channel: Channel, path: Any) -> PathLock:
    """The lock holding exactly this normalized path (the reference's unlock/recover target).

    A path that does not normalize names no lock: PATH_LOCK_NOT_FOUND, as in the reference.
    Two records holding it (only possible in imported data) → PATH_LOCK_CONFLICT.
    """
    folded = case_insensitive()
    try:
        entry = path_normalize(path, case_insensitive=folded)
    except AppError:
        raise _not_found(path) from None
    wanted = match_key(entry.normalized_path, case_insensitive=folded)
    matches = [
        lock
        for lock in _locks(channel)
        if any(
            match_key(e.normalized_path, case_insensitive=folded) == wanted
            for e in lock.entries.all()
        )
    ]
    if not matches:
        raise _not_found(path)
    if len(matches) > 1:
        raise AppError(
            "PATH_LOCK_CONFLICT",
            f"path target matches multiple lock records: {safe_text(path, 200)}",
            detail={"lock_ids": [lock.lock_id for lock in matches]},
        )
    return matches[0]
