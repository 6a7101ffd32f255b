"""The lock record, its audit payloads and their spellings. Pure functions (no queries: a lock
passed in carries its channel and its entries, as ``selectors`` loads them).

One definition for the API and for the folder renderer (agentchat/folder/render.py), which writes
``locks/<lock_id>.json`` with ``lock_file_bytes`` byte for byte as the reference does
(REFERENCE-CLI §3.9: keys sorted, 2-space indent, ``ensure_ascii=False``, a final newline).
Lock times are spelled with microseconds and ``+00:00``
(``agentchat.core.rules.records.ts_micros``); they are the precise times now, so the microseconds
are no longer always ``000000``.

Audit payloads (REFERENCE-CLI §3.13): ``path.locked`` and ``path.lock.unlocked`` carry
``channel, event, expires_at, lease_expires_at, lock_id, owner, paths, transaction_id,
updated_at``; ``path.lock.recovered`` adds ``previous_owner, previous_expires_at,
previous_lease_expires_at, recovery_reason``. Ours, on top of the reference: an ``actor`` key
when the one who acted is not the lock's new owner (an admin recovering for someone), and
``path.lock.force_released`` (an admin's break-glass release): the record as it was, as for an
unlock, plus ``actor`` and ``reason``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from agentchat.core.rules.records import is_expired, row_time, ts_micros
from locks_app.models import PathLock

EVENT_LOCKED = "path.locked"
EVENT_UNLOCKED = "path.lock.unlocked"
EVENT_RECOVERED = "path.lock.recovered"
EVENT_FORCE_RELEASED = "path.lock.force_released"


def lock_timestamp(value: datetime | None) -> str | None:
    """The one spelling of lock times: ``2026-11-29T15:46:20.123456+00:00``."""
    return None if value is None else ts_micros(value)


def lock_time(lock: PathLock, field: str) -> str | None:
    """One of a lock's times in its record (``row_time``)."""
    return row_time(lock, field)


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
        "expires_at": lock_time(lock, "expires_at"),
        "lock_id": lock.lock_id,
        "locked_at": lock_time(lock, "locked_at"),
        "owner": lock.owner,
        "paths": lock_paths(lock),
        "previous_expires_at": lock_time(lock, "previous_expires_at"),
        "previous_owner": lock.previous_owner,
        "recovery_reason": lock.recovery_reason,
        "updated_at": lock_time(lock, "updated_at"),
    }


def lock_api_dict(lock: PathLock) -> dict[str, Any]:
    """A lock as the API answers it: the record (``lock_to_dict``, the folder's) and its
    ``fence`` after it (docs/locks.md, "Fencing tokens")."""
    return {**lock_to_dict(lock), "fence": lock.fence}


def lock_file_bytes(record: dict[str, Any]) -> bytes:
    """``locks/<lock_id>.json`` as the reference writes it, from ``lock_to_dict``'s record."""
    text = json.dumps(record, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return text.encode("utf-8")


def lock_file_name(record: dict[str, Any]) -> str:
    return f"locks/{record['lock_id']}.json"


def lock_conflict_to_dict(lock: PathLock, now: datetime) -> dict[str, Any]:
    """One entry of a check result or a conflict error (the reference's conflict details)."""
    return {
        "lock_id": lock.lock_id,
        "owner": lock.owner,
        "expires_at": lock_time(lock, "expires_at"),
        "expired": is_expired(lock.expires_at, now),
        "paths": lock_paths(lock),
    }


def lock_audit_payload(
    event: str,
    record: dict[str, Any],
    *,
    transaction_id: str,
    previous: dict[str, Any] | None = None,
    actor: str | None = None,
    reason: str | None = None,
    fence: int | None = None,
) -> dict[str, Any]:
    """The body of a lock mutation's audit message (see the module doc).

    ``record`` is the lock after the change (before it, for an unlock or a force release);
    ``previous`` the record before a recovery; ``actor`` is added when it is not the record's
    owner, or always with ``reason`` (a force release); ``fence`` is the lock's fencing token
    (docs/locks.md), which the reference's payload has no key for.
    """
    payload: dict[str, Any] = {
        "channel": record["channel"],
        "event": event,
        "expires_at": record["expires_at"],
        "lease_expires_at": record["expires_at"],
        "lock_id": record["lock_id"],
        "owner": record["owner"],
        "paths": record["paths"],
        "transaction_id": transaction_id,
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
    if actor is not None and (reason is not None or actor != record["owner"]):
        payload["actor"] = actor
    if reason is not None:
        payload["reason"] = reason
    if fence is not None:
        payload["fence"] = fence
    return payload
