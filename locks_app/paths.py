"""Paths of path locks: validation and normalization of a request's paths. Pure functions.

A lock path follows the floor's workspace path rules (``agentchat.core.paths``: separators,
traversal, control characters, reserved names, NFC, case folding, sizes), refused with
PATH_LOCK_INVALID_PATH, plus the syntax and bounds of glob patterns (``locks_app.globs``).

``kind`` (``directory`` for a trailing ``/``) is informational: overlap ignores it.

Globs, and when two entries overlap: ``locks_app.globs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentchat.core.errors import AppError
from agentchat.core.paths import (
    casefold_stable,
    path_segments,
    safe_text,
    workspace_path_normalize,
)
from locks_app.globs import has_glob, paths_overlap, pattern_segment_check

INVALID_PATH = "PATH_LOCK_INVALID_PATH"
MAX_PATTERN_SEGMENTS = 16
MAX_PATHS = 64


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


def _invalid(message: str, path: Any) -> AppError:
    return AppError(INVALID_PATH, message, detail={"path": safe_text(path)})


def path_normalize(raw: Any, *, case_insensitive: bool = False) -> PathEntry:
    """Validate and canonicalize one lock path or pattern. Raises PATH_LOCK_INVALID_PATH."""
    path = workspace_path_normalize(raw, code=INVALID_PATH, case_insensitive=case_insensitive)
    patterns = 0
    for segment in path_segments(path.normalized):
        if has_glob(segment):
            patterns += 1
            pattern_segment_check(segment, raw)
    if patterns > MAX_PATTERN_SEGMENTS:
        raise _invalid(f"path has more than {MAX_PATTERN_SEGMENTS} pattern segments", raw)
    return PathEntry(normalized_path=path.normalized, display_path=path.display, kind=path.kind)


def paths_normalize(raw_paths: Any, *, case_insensitive: bool = False) -> list[PathEntry]:
    """Normalize a request's paths: a non-empty list, no two overlapping.

    Raises PATH_LOCK_INVALID_PATH, PATH_LOCK_CONFLICT (two requested paths overlap).
    """
    if not isinstance(raw_paths, (list, tuple)) or not raw_paths:
        raise AppError(
            INVALID_PATH, "at least one path is required", detail={"paths": safe_text(raw_paths)}
        )
    if len(raw_paths) > MAX_PATHS:
        raise AppError(
            INVALID_PATH, f"at most {MAX_PATHS} paths per request", detail={"limit": MAX_PATHS}
        )
    entries: list[PathEntry] = []
    for raw in raw_paths:
        entry = path_normalize(raw, case_insensitive=case_insensitive)
        if any(paths_overlap(entry.normalized_path, old.normalized_path) for old in entries):
            raise AppError(
                "PATH_LOCK_CONFLICT",
                "requested paths overlap within one lock request",
                detail={"paths": [item.to_dict() for item in [*entries, entry]]},
            )
        entries.append(entry)
    return entries


def match_key(normalized_path: str, *, case_insensitive: bool) -> str:
    """The form compared for conflicts and unlock-by-path (folded when the setting is on,
    which also covers records written before it was turned on)."""
    return casefold_stable(normalized_path) if case_insensitive else normalized_path
