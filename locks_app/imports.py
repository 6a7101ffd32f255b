"""Path locks from a reference folder (``locks/<lock_id>.json``): the reference's strict record
rules (REFERENCE-CLI §3.9) as a pure parser, and the check that no two imported records
overlap (this server keeps locks of a channel disjoint). The write is
``locks_app.services.locks_import``.

Owners are agent names (this server's rule; the reference takes any record id). The expiry
aliases are the reference's: ``lease_expires_at`` for ``expires_at`` and
``previous_lease_expires_at`` for ``previous_expires_at``; when both spellings are present
they must agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypedDict, cast

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import RECORD_ID_RE, check_agent_name
from agentchat.core.rules.records import ts_parse
from agentchat.core.rules.validation import reason_check, text_problem
from locks_app.globs import WorkBudget, is_pattern, paths_overlap
from locks_app.models import PathLockEntry
from locks_app.paths import MAX_PATHS, PathEntry, path_normalize

LOCK_FIELDS = (
    "lock_id",
    "channel",
    "owner",
    "paths",
    "expires_at",
    "locked_at",
    "updated_at",
    "previous_owner",
    "previous_expires_at",
    "recovery_reason",
)
_ALIASES = {"lease_expires_at": "expires_at", "previous_lease_expires_at": "previous_expires_at"}
_PATH_FIELDS = ("normalized_path", "display_path", "kind")
LOCK_ID_MAX = 64
TIME_FIELDS = ("expires_at", "locked_at", "updated_at", "previous_expires_at")


class LockTimes(TypedDict):
    expires_at: datetime
    locked_at: datetime
    updated_at: datetime
    previous_expires_at: datetime | None


@dataclass(frozen=True)
class LockImport:
    source: str  # the file, for errors
    lock_id: str
    owner: str
    entries: list[PathEntry]
    times: LockTimes
    spellings: dict[str, str]
    previous_owner: str | None
    recovery_reason: str | None


def _invalid(message: str, **detail: Any) -> AppError:
    return AppError("PATH_LOCK_INVALID_RECORD", message, detail=detail)


def _entry(item: Any) -> PathEntry:
    if not isinstance(item, dict):
        raise _invalid("lock path must be an object")
    unknown = sorted(str(key) for key in item if key not in _PATH_FIELDS)
    missing = [field for field in _PATH_FIELDS if field not in item]
    if unknown or missing:
        raise _invalid(
            "lock path must hold exactly normalized_path, display_path and kind",
            unknown=unknown[:20],
            missing=missing,
        )
    normalized, display, kind = item["normalized_path"], item["display_path"], item["kind"]
    if kind not in PathLockEntry.Kind.values:
        raise _invalid("path kind must be file or directory")
    if not isinstance(display, str) or not display or text_problem(display, single_line=True):
        raise _invalid("display_path must be safe non-empty text")
    if len(display) > 1024:
        raise _invalid("display_path is over 1024 characters")
    try:
        canonical = (
            path_normalize(normalized).normalized_path if isinstance(normalized, str) else None
        )
    except AppError:
        canonical = None
    if canonical is None or canonical != normalized:
        raise _invalid(
            "persisted normalized_path is not a canonical workspace-relative path",
            normalized_path=normalized[:200] if isinstance(normalized, str) else None,
        )
    return PathEntry(normalized_path=normalized, display_path=display, kind=kind)


def lock_record_parse(data: Any, *, channel: str, stem: str, source: str) -> LockImport:
    """One ``locks/<stem>.json`` record. Raises PATH_LOCK_INVALID_RECORD (not an object,
    missing or unknown keys, aliases that disagree, paths, the recovery fields not together,
    another channel, an id that is not the file's), PATH_LOCK_INVALID_LOCK_ID,
    PATH_LOCK_INVALID_OWNER, PATH_LOCK_INVALID_TIMESTAMP, PATH_LOCK_INVALID_REASON."""
    if not isinstance(data, dict):
        raise _invalid("lock record must be an object")
    values = dict(data)
    for alias, field in _ALIASES.items():
        if alias in values:
            if field in values and values[field] != values[alias]:
                raise _invalid(f"{field} and {alias} aliases disagree")
            values[field] = values.pop(alias)
    missing = [field for field in LOCK_FIELDS[:7] if field not in values]
    unknown = sorted(str(key) for key in values if key not in LOCK_FIELDS)
    if missing:
        raise _invalid(f"lock record is missing required fields: {', '.join(missing)}")
    if unknown:
        raise _invalid(f"lock record contains unknown fields: {', '.join(unknown[:20])}")
    lock_id = values["lock_id"]
    if (
        not isinstance(lock_id, str)
        or len(lock_id) > LOCK_ID_MAX
        or not RECORD_ID_RE.fullmatch(lock_id)
    ):
        raise AppError("PATH_LOCK_INVALID_LOCK_ID", "lock_id must be a safe identity")
    if values["channel"] != channel:
        raise _invalid(f"lock channel {str(values['channel'])[:100]!r} does not match {channel!r}")
    if lock_id != stem:
        raise _invalid("lock id does not match its file name", lock_id=lock_id)
    owner = check_agent_name(values["owner"], field="owner", code="PATH_LOCK_INVALID_OWNER")
    paths = values["paths"]
    if not isinstance(paths, list) or not paths:
        raise _invalid("lock must contain at least one path")
    if len(paths) > MAX_PATHS:
        raise _invalid(f"a lock holds at most {MAX_PATHS} paths")
    entries = [_entry(item) for item in paths]
    times: dict[str, datetime | None] = {}
    spellings: dict[str, str] = {}
    for field in TIME_FIELDS:
        value = values.get(field)
        if value is None and field == "previous_expires_at":
            times[field] = None
            continue
        parsed = ts_parse(value) if isinstance(value, str) and len(value) <= 64 else None
        if parsed is None:
            raise AppError(
                "PATH_LOCK_INVALID_TIMESTAMP",
                f"{field} must be an ISO-8601 string with an explicit UTC offset",
                detail={"field": field},
            )
        times[field], spellings[field] = parsed, cast(str, value)
    previous_owner = values.get("previous_owner")
    if previous_owner is not None:
        previous_owner = check_agent_name(
            previous_owner, field="previous_owner", code="PATH_LOCK_INVALID_OWNER"
        )
    reason = values.get("recovery_reason")
    if reason is not None:
        reason = reason_check(reason, code="PATH_LOCK_INVALID_REASON")
    recovery = (previous_owner, times["previous_expires_at"], reason)
    if any(value is not None for value in recovery) and None in recovery:
        raise _invalid("previous owner, expiry, and recovery reason must be recorded together")
    return LockImport(
        source=source,
        lock_id=lock_id,
        owner=owner,
        entries=entries,
        times=cast(LockTimes, times),  # each of TIME_FIELDS, None for an optional one only
        spellings=spellings,
        previous_owner=previous_owner,
        recovery_reason=reason,
    )


def locks_overlap_check(locks: Sequence[LockImport]) -> None:
    """No two paths of the imported locks overlap (equal, one inside the other, ``.``, or a
    pattern matching the other), within a record or across records: the server never holds
    overlapping locks. Literal paths are compared through their ancestors (linear in the
    paths' depth); patterns pairwise, within a work budget. Raises PATH_LOCK_CONFLICT (naming
    both files), PATH_LOCK_PATTERN_TOO_COMPLEX."""
    held: dict[str, LockImport] = {}  # each path seen
    above: dict[str, LockImport] = {}  # each proper ancestor of a path seen ("." included)
    everything: list[tuple[str, LockImport]] = []

    def conflict(path: str, lock: LockImport, other: LockImport) -> AppError:
        return AppError(
            "PATH_LOCK_CONFLICT",
            f"{lock.source}: path {path!r} overlaps a path of {other.source}",
            detail={"file": lock.source, "path": path, "other": other.source},
        )

    for lock in locks:
        for entry in lock.entries:
            path = entry.normalized_path
            parts = [] if path == "." else path.split("/")
            ancestors = [".", *("/".join(parts[:depth]) for depth in range(1, len(parts)))]
            if path in held or path in above:
                raise conflict(path, lock, held.get(path) or above[path])
            for ancestor in ancestors:
                if ancestor in held:
                    raise conflict(path, lock, held[ancestor])
            held[path] = lock
            for ancestor in ancestors:
                above.setdefault(ancestor, lock)
            everything.append((path, lock))
    budget = WorkBudget()
    for index, (pattern, lock) in enumerate(everything):
        if not is_pattern(pattern):
            continue
        for other_index, (path, other) in enumerate(everything):
            if other_index != index and paths_overlap(pattern, path, budget):
                raise conflict(pattern, lock, other)
