"""Workspace-relative paths: what a valid one is, and its canonical form. Pure functions.

The rules every app shares (path locks check their paths with them, tasks their
``files_hint``); each caller passes its own error code. Glob patterns are no concern here:
``*``, ``?`` and ``[`` are ordinary characters to these rules (locks_app interprets them).

The server has no workspace on disk, so a path is text checked by rules that hold on every
platform (the reference CLI's rules plus its Windows rules, everywhere):

* Only ``/`` separates. Empty and ``.`` segments are dropped (``./src//a.py`` → ``src/a.py``);
  nothing left means ``.``, the whole workspace.
* Refused: empty or non-string input; ``..`` anywhere; absolute paths and drive prefixes
  (``/x``, ``C:x``); any ``:``; backslashes; control characters (< 0x20, 0x7F-0x9F), lone
  surrogates, bidirectional-override characters and every invisible or blank-looking character
  (``agentchat.core.rules.validation.INVISIBLE``: U+200B, U+200D, U+FEFF, U+00AD, U+3164…);
  Windows reserved names (CON, PRN, AUX,
  NUL, COM0-9, COM¹²³, LPT0-9, LPT¹²³, CONIN$, CONOUT$ — any case, any extension); segments
  ending in a dot or a space; percent-escapes such as ``%2e%2e`` (the server never URL-decodes
  a path; send it decoded); segments that Unicode compatibility normalization (NFKC) turns
  into ``.``, ``..`` or something containing ``/``, ``\\`` or ``:`` (full-width dots U+FF0E
  U+FF0E, the two-dot leader U+2025, the full-width solidus U+FF0F); paths over
  ``MAX_PATH_BYTES`` bytes or ``MAX_SEGMENTS`` segments, segments over ``MAX_SEGMENT_BYTES``
  bytes.
* Unicode: paths are compared in NFC, so ``é`` typed precomposed (NFC) or decomposed (NFD) is
  one path. Normalize first, then validate, then compare.
* Case: with ``case_insensitive`` the normalized path is case-folded (``str.casefold``, then
  NFC), as the reference does on Windows.
* ``kind``: ``directory`` when the path as sent ends with ``/`` (or its last segment is
  ``.``, so ``.`` itself), else ``file``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import INVISIBLE

MAX_PATH_BYTES = 1024
MAX_SEGMENT_BYTES = 255
MAX_SEGMENTS = 128

KIND_FILE = "file"
KIND_DIRECTORY = "directory"
WORKSPACE = "."

_RESERVED_NAMES = frozenset(
    {"CON", "PRN", "AUX", "NUL", "CONIN$", "CONOUT$"}
    | {f"{base}{suffix}" for base in ("COM", "LPT") for suffix in [*"0123456789", "¹", "²", "³"]}
)
_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
_DRIVE_PREFIX = re.compile(r"[A-Za-z]:")


@dataclass(frozen=True)
class WorkspacePath:
    """A valid path: its canonical form, the caller's spelling and its kind."""

    normalized: str
    display: str
    kind: str


def safe_text(value: Any, limit: int = 300) -> Any:
    """A value that can always be rendered as JSON (lone surrogates escaped, long text cut)."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # NaN and infinities are not JSON
    if not isinstance(value, str):
        return value if value is None or isinstance(value, (int, float, bool)) else repr(value)
    text = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= limit else text[:limit] + "…"


def casefold_stable(text: str) -> str:
    """Case-fold then NFC, repeated until stable, so folding a folded path changes nothing."""
    for _ in range(4):
        folded = unicodedata.normalize("NFC", text.casefold())
        if folded == text:
            break
        text = folded
    return text


def path_segments(normalized: str) -> list[str]:
    """The segments of a normalized path (none for the workspace ``.``)."""
    return [] if normalized == WORKSPACE else normalized.split("/")


def _is_forbidden_char(char: str) -> bool:
    code = ord(char)
    return (
        code < 0x20
        or 0x7F <= code <= 0x9F
        or 0xD800 <= code <= 0xDFFF
        # Every invisible format character (the bidirectional controls among them) and every
        # blank-looking one: ``src/a\u200b.py`` shows as
        # ``src/a.py`` but locks (and hints at) another path.
        or INVISIBLE.match(char) is not None
    )


class _Rules:
    """The checks of one call, raising ``code`` with the raw input in the detail."""

    def __init__(self, raw: Any, code: str, field: str | None) -> None:
        self.raw = raw
        self.code = code
        self.field = field

    def invalid(self, message: str) -> AppError:
        detail: dict[str, Any] = {"path": safe_text(self.raw)}
        if self.field is not None:
            detail["field"] = self.field
        return AppError(self.code, message, detail=detail)

    def characters(self, text: str) -> None:
        if any(_is_forbidden_char(char) for char in text):
            raise self.invalid("path contains a forbidden control character")
        if "\\" in text:
            raise self.invalid("backslashes are not valid portable separators")
        if text.startswith("/") or _DRIVE_PREFIX.match(text):
            raise self.invalid("absolute paths are not allowed")
        if ":" in text:
            raise self.invalid("path names may not contain ':'")

    def segment(self, segment: str) -> None:
        compat = unicodedata.normalize("NFKC", segment)
        if compat in {".", ".."} or any(char in compat for char in "/\\:"):
            raise self.invalid(
                "path segment turns into a dot, a separator or ':' under Unicode compatibility "
                "normalization"
            )
        if segment.endswith((".", " ")) or compat.endswith((".", " ")):
            raise self.invalid("path segments may not end with a dot or a space")
        stem = unicodedata.normalize("NFKC", segment.split(".", 1)[0]).rstrip(" ").upper()
        if (
            stem in _RESERVED_NAMES
            or segment.split(".", 1)[0].rstrip(" ").upper() in _RESERVED_NAMES
        ):
            raise self.invalid("path contains a reserved Windows name")
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise self.invalid(f"path segments may be at most {MAX_SEGMENT_BYTES} bytes")


def workspace_path_normalize(
    raw: Any,
    *,
    code: str,
    case_insensitive: bool = False,
    field: str | None = None,
) -> WorkspacePath:
    """Validate and canonicalize one workspace-relative path (the rules of the module doc).

    Every refusal raises ``AppError(code, …)`` with ``{"path": <raw, made printable>}`` (and
    ``"field"`` when given) as its detail.
    """
    rules = _Rules(raw, code, field)
    if not isinstance(raw, str) or not raw:
        raise rules.invalid("path must be a non-empty string")
    if len(raw) > MAX_PATH_BYTES or len(raw.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise rules.invalid(f"path is longer than {MAX_PATH_BYTES} bytes")
    rules.characters(raw)
    if _PERCENT_ESCAPE.search(raw):
        raise rules.invalid("percent-encoded sequences are not allowed: send the path decoded")
    text = unicodedata.normalize("NFC", raw)
    rules.characters(text)
    raw_parts = text.split("/")
    if ".." in raw_parts:
        raise rules.invalid("parent traversal is not allowed")
    kind = KIND_DIRECTORY if raw_parts[-1] in {"", "."} else KIND_FILE
    parts = [part for part in raw_parts if part not in {"", "."}]
    canonical = "/".join(parts) or WORKSPACE
    if case_insensitive:
        canonical = casefold_stable(canonical)
        rules.characters(canonical)
    if len(canonical.encode("utf-8")) > MAX_PATH_BYTES:
        raise rules.invalid(f"path is longer than {MAX_PATH_BYTES} bytes")
    segments = path_segments(canonical)
    if len(segments) > MAX_SEGMENTS:
        raise rules.invalid(f"path has more than {MAX_SEGMENTS} segments")
    for segment in segments:
        if segment == "..":
            raise rules.invalid("parent traversal is not allowed")
        rules.segment(segment)
    return WorkspacePath(normalized=canonical, display=raw, kind=kind)
