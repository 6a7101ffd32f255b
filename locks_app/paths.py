"""Paths of path locks: validation and normalization of a request's paths. Pure functions.

A lock path follows the floor's workspace path rules (``agentchat.core.rules.paths``: separators,
traversal, control characters, reserved names, NFC, case folding, sizes), refused with
PATH_LOCK_INVALID_PATH, plus the syntax and bounds of glob patterns (``locks_app.globs``).

``kind`` (``directory`` for a trailing ``/``) is informational: overlap ignores it.

Globs, and when two entries overlap: ``locks_app.globs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.paths import (
    WORKSPACE,
    casefold_stable,
    path_segments,
    safe_text,
    workspace_path_normalize,
)
from locks_app.globs import (
    MAX_PATTERN_WILDCARDS,
    UNBOUNDED,
    WorkBudget,
    has_glob,
    literal_anchor,
    paths_overlap,
    pattern_segment_check,
    wildcard_count,
)

MAX_PATHS = 64
MAX_ANCHOR_BYTES = 1024


@dataclass(frozen=True)
class PathEntry:
    """One requested path: its canonical form, the caller's spelling and its kind."""

    normalized_path: str
    display_path: str
    kind: str

    def to_dict(self) -> dict[str, str]:
        return {
            "display_path": self.display_path,
            "kind": self.kind,
            "normalized_path": self.normalized_path,
        }


def path_normalize(raw: Any, *, case_insensitive: bool = False) -> PathEntry:
    """Validate and canonicalize one lock path or pattern.

    Raises PATH_LOCK_INVALID_PATH, PATH_LOCK_PATTERN_TOO_COMPLEX (over
    ``MAX_PATTERN_WILDCARDS`` wildcards).
    """
    path = workspace_path_normalize(
        raw, code="PATH_LOCK_INVALID_PATH", case_insensitive=case_insensitive
    )
    for segment in path_segments(path.normalized):
        if has_glob(segment):
            pattern_segment_check(segment, raw)
    wildcards = wildcard_count(path.normalized)
    if wildcards > MAX_PATTERN_WILDCARDS:
        raise AppError(
            "PATH_LOCK_PATTERN_TOO_COMPLEX",
            f"a path may hold at most {MAX_PATTERN_WILDCARDS} wildcards (*, ?, [...], **)",
            detail={"path": safe_text(raw), "wildcards": wildcards, "limit": MAX_PATTERN_WILDCARDS},
        )
    return PathEntry(normalized_path=path.normalized, display_path=path.display, kind=path.kind)


def paths_normalize(
    raw_paths: object, *, case_insensitive: bool = False, budget: WorkBudget = UNBOUNDED
) -> list[PathEntry]:
    """Normalize a request's paths: a non-empty list, no two overlapping.

    Raises PATH_LOCK_INVALID_PATH, PATH_LOCK_PATTERN_TOO_COMPLEX (a path with too many
    wildcards, or comparing them takes more than ``budget``), PATH_LOCK_CONFLICT (two
    requested paths overlap).
    """
    if not isinstance(raw_paths, (list, tuple)) or not raw_paths:
        raise AppError(
            "PATH_LOCK_INVALID_PATH",
            "at least one path is required",
            detail={"paths": safe_text(raw_paths)},
        )
    if len(raw_paths) > MAX_PATHS:
        raise AppError(
            "PATH_LOCK_INVALID_PATH",
            f"at most {MAX_PATHS} paths per request",
            detail={"limit": MAX_PATHS},
        )
    entries: list[PathEntry] = []
    for raw in raw_paths:
        entry = path_normalize(raw, case_insensitive=case_insensitive)
        if any(
            paths_overlap(entry.normalized_path, old.normalized_path, budget) for old in entries
        ):
            raise AppError(
                "PATH_LOCK_CONFLICT",
                "requested paths overlap within one lock request",
                detail={"paths": [item.to_dict() for item in [*entries, entry]]},
            )
        entries.append(entry)
    return entries


@dataclass(frozen=True)
class LockPaths:
    """One request's paths, normalized (``lock_paths_parse``), with the work budget the
    request has left for comparing them with the held entries: a request's comparisons, with
    each other and with what is held, share one budget."""

    entries: tuple[PathEntry, ...]
    budget: WorkBudget


def lock_paths_parse(raw_paths: object, *, case_insensitive: bool) -> LockPaths:
    """A request's paths (any JSON value) as ``paths_normalize`` judges them, under a new
    request budget. Raises the codes of ``paths_normalize``."""
    budget = WorkBudget()
    entries = paths_normalize(raw_paths, case_insensitive=case_insensitive, budget=budget)
    return LockPaths(tuple(entries), budget)


def match_key(normalized_path: str, *, case_insensitive: bool) -> str:
    """The form compared for conflicts and unlock-by-path (folded when the setting is on,
    which also covers records written before it was turned on)."""
    return casefold_stable(normalized_path) if case_insensitive else normalized_path


def anchor_key(match: str) -> str:
    """The index key of a match key: its literal anchor, cut at a segment boundary to at most
    ``MAX_ANCHOR_BYTES`` (folding can lengthen a path). A shorter key is an ancestor of the
    true anchor, so the lookup finds a superset of the candidates: never fewer."""
    anchor = literal_anchor(match)
    if len(anchor.encode("utf-8")) <= MAX_ANCHOR_BYTES:
        return anchor
    kept: list[str] = []
    size = 0
    for segment in path_segments(anchor):
        size += len(segment.encode("utf-8")) + (1 if kept else 0)
        if size > MAX_ANCHOR_BYTES:
            break
        kept.append(segment)
    return "/".join(kept) or WORKSPACE


def index_key(channel_id: int, anchor: str) -> str:
    """``<channel id>:<anchor>``: the column the conflict lookup probes. The channel is part of
    the key, not a column of the index, so that the key's index is the only one a probe can
    use (with a composite index next to the unique (channel, path) one, PostgreSQL without
    statistics could plan a probe as a filter over the whole channel)."""
    return f"{channel_id}:{anchor}"


def entry_index_keys(channel_id: int, normalized_path: str) -> tuple[str, str]:
    """(``index_key``, ``index_key_folded``) of a stored entry: its lookup keys with the
    case-insensitive setting off and on."""
    return (
        index_key(channel_id, anchor_key(normalized_path)),
        index_key(channel_id, anchor_key(match_key(normalized_path, case_insensitive=True))),
    )
