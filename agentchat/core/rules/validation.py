"""The one parsing layer for hostile input, shared by every surface and every service.

- Text: ``text_check`` refuses what no stored string may hold anywhere (lone surrogates, which
  cannot be encoded and broke every later read; NUL, which PostgreSQL refuses) and, for one-line
  fields, every line separator and C0/C1 control character (VT, FF, NEL, U+2028/2029, ESC…: a
  title printed by an agent's terminal must not move its cursor or change its colours).
- JSON values: ``json_value_check`` walks a value once: strings and keys as above, numbers
  finite, nesting bounded (``MAX_JSON_DEPTH``), so whatever is stored can always be encoded
  again. ``json_loads_strict`` (every request body) runs it on the whole body.
- Integers from text (query parameters, path parts): ``int_parse`` takes ASCII digits only,
  at most ``MAX_INT_DIGITS`` of them (``int("²")`` and 4,300-digit numbers both crashed before).
- Sizes: ``field_size_check``.
- Invisible characters: one-line fields (and topics) also refuse the bidirectional controls and
  every invisible format character (Unicode category Cf: U+202E RIGHT-TO-LEFT OVERRIDE,
  U+200D ZERO WIDTH JOINER, U+FEFF BYTE ORDER MARK…) and the blank-looking letters and marks
  (``BLANK_LOOKING``: U+3164 HANGUL FILLER, U+2800 BRAILLE PATTERN BLANK…) with
  INVISIBLE_CHARACTER: a name or title
  that reads one way on screen and compares another is a spoof. Bodies keep them (the
  dashboard shows each one as a visible mark: ``agentchat.dashboard.markdown``).

Services call these too (not only the API), because the admin, management commands and the
folder import reach services without the REST layer.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any, overload

from django.conf import settings

from agentchat.core.rules.errors import AppError

MAX_JSON_DEPTH = 64
MAX_INT_DIGITS = 18  # below 2**63: every integer we take fits a BIGINT column

# Anywhere: lone surrogates (a well-formed pair is one character in Python) and NUL.
_NEVER = re.compile("[\x00\ud800-\udfff]")
# One-line fields: every C0 control, DEL, every C1 control (NEL is U+0085), and the Unicode
# line and paragraph separators.
_NOT_ONE_LINE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")
# Every character of Unicode category Cf (format: invisible, or steering the text's direction),
# as ranges; a test checks the class against ``unicodedata``. The bidirectional controls
# (U+061C, U+200E-200F, U+202A-202E, U+2066-2069) are among them. Later Unicode versions may
# add Cf characters inside these blocks, so the Egyptian hieroglyph controls take their block.
INVISIBLE_RANGES = (
    (0x00AD, 0x00AD), (0x0600, 0x0605), (0x061C, 0x061C), (0x06DD, 0x06DD), (0x070F, 0x070F),
    (0x0890, 0x0891), (0x08E2, 0x08E2), (0x180E, 0x180E), (0x200B, 0x200F), (0x202A, 0x202E),
    (0x2060, 0x2064), (0x2066, 0x206F), (0xFEFF, 0xFEFF), (0xFFF9, 0xFFFB), (0x110BD, 0x110BD),
    (0x110CD, 0x110CD), (0x13430, 0x1343F), (0x1BCA0, 0x1BCA3), (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001), (0xE0020, 0xE007F),
)  # fmt: skip
# Characters outside Cf that render as nothing (or as blank space of a letter's width), so a
# name made of them, or holding one, looks empty or like another name. U+FE0F VARIATION
# SELECTOR-16 is not among them: emoji need it.
BLANK_LOOKING = (
    "\u034f",  # COMBINING GRAPHEME JOINER (Mn)
    "\u115f",  # HANGUL CHOSEONG FILLER (Lo)
    "\u1160",  # HANGUL JUNGSEONG FILLER (Lo)
    "\u17b4",  # KHMER VOWEL INHERENT AQ (Mn)
    "\u17b5",  # KHMER VOWEL INHERENT AA (Mn)
    "\u2800",  # BRAILLE PATTERN BLANK (So)
    "\u3164",  # HANGUL FILLER (Lo)
    "\uffa0",  # HALFWIDTH HANGUL FILLER (Lo)
)
INVISIBLE = re.compile(
    "["
    + "".join(f"{chr(a)}-{chr(b)}" if a != b else chr(a) for a, b in INVISIBLE_RANGES)
    + "".join(BLANK_LOOKING)
    + "]"
)
# A body can hold a lone surrogate or a NUL only through a \u escape (raw UTF-8 cannot encode a
# surrogate, and JSON forbids raw control characters in strings): bodies without one skip the
# walk.
_RISKY_ESCAPE = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")


def _describe(char: str) -> str:
    return f"U+{ord(char):04X}"


def text_problem(value: str, *, single_line: bool = False) -> str | None:
    """Why ``value`` may not be stored as text, or None."""
    bad = (_NOT_ONE_LINE if single_line else _NEVER).search(value)
    if bad is None:
        return None
    char = bad.group()
    if 0xD800 <= ord(char) <= 0xDFFF:
        return f"contains a lone surrogate ({_describe(char)}), which is not valid Unicode text"
    if char == "\x00":
        return "contains a NUL character"
    return f"must be one line without control characters (found {_describe(char)})"


def invisible_problem(value: str) -> str | None:
    """Why ``value`` may not be a one-line field for its invisible characters, or None."""
    bad = INVISIBLE.search(value)
    if bad is None:
        return None
    return f"contains an invisible or direction-changing character ({_describe(bad.group())})"


def field_size_check(name: str, value: str) -> None:
    """Raises FIELD_TOO_LARGE when ``value`` is over AGENTCHAT_MAX_FIELD_BYTES in UTF-8."""
    limit = settings.AGENTCHAT_MAX_FIELD_BYTES
    if len(value) > limit // 4 and len(value.encode("utf-8", "surrogatepass")) > limit:
        raise AppError(
            "FIELD_TOO_LARGE",
            f"{name} is over {limit} bytes",
            detail={"field": name, "limit": limit},
        )


def text_check(
    value: Any,
    *,
    field: str,
    code: str = "INVALID_VALUE",
    single_line: bool = False,
    max_chars: int | None = None,
    allow_empty: bool = True,
    visible: bool | None = None,
) -> str:
    """``value`` as stored text. Raises ``code`` (not a string, empty when ``allow_empty`` is
    false, over ``max_chars``, or ``text_problem``), FIELD_TOO_LARGE, or INVISIBLE_CHARACTER
    (``invisible_problem``) when ``visible`` (by default: a one-line field)."""
    if not isinstance(value, str):
        raise AppError(code, f"{field} must be a string", detail={"field": field})
    field_size_check(field, value)
    problem = text_problem(value, single_line=single_line)
    if problem is not None:
        raise AppError(code, f"{field} {problem}", detail={"field": field})
    if (single_line if visible is None else visible) and (
        invisible := invisible_problem(value)
    ) is not None:
        raise AppError(
            "INVISIBLE_CHARACTER",
            f"{field} {invisible}",
            detail={"field": field, "char": invisible.rsplit("(", 1)[1].rstrip(")")},
        )
    if not allow_empty and not value.strip():
        raise AppError(code, f"{field} must not be empty", detail={"field": field})
    if max_chars is not None and len(value) > max_chars:
        raise AppError(
            code,
            f"{field} is over {max_chars} characters",
            detail={"field": field, "max_chars": max_chars},
        )
    return value


REASON_MAX = 1000


def reason_check(value: Any, *, code: str, empty_message: str = "reason must not be empty") -> str:
    """A recovery or force-release reason, of a lease or a lock (the family's ``code``): one
    line (no C0/DEL/C1 control, U+2028/2029 or lone surrogate), not blank, at most
    ``REASON_MAX`` characters. A missing or blank one, and any value that is no string (the
    reference's lease family says so for every such value), gets ``empty_message``."""
    if not isinstance(value, str) or not value.strip():
        raise AppError(code, empty_message, detail={"field": "reason"})
    return text_check(
        value, field="reason", code=code, single_line=True, max_chars=REASON_MAX, allow_empty=False
    )


def _json_problem(value: Any, *, root: str | None) -> tuple[str, str, str] | None:
    """The first problem in a JSON value as (kind, path, text), kind being "text", "number" or
    "depth"; None when there is none. Paths (from ``root``) cost a string per node, so the
    first walk goes without them (``root=None``) and only a failing value is walked again."""
    paths = root is not None
    stack: list[tuple[Any, int, str]] = [(value, 1, root or "")]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, str):
            problem = text_problem(item)
            if problem is not None:
                return "text", path, f"a string {problem}"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return "number", path, "is a non-finite number"
        elif isinstance(item, (dict, list)):
            if depth > MAX_JSON_DEPTH:
                return "depth", path, f"is nested deeper than {MAX_JSON_DEPTH} levels"
            if isinstance(item, dict):
                for key, child in item.items():
                    problem = text_problem(key)
                    if problem is not None:
                        return "text", path, f"a key {problem}"
                    child_path = (f"{path}.{key}" if path else key) if paths else ""
                    stack.append((child, depth + 1, child_path))
            elif paths:
                stack.extend((child, depth + 1, f"{path}[{i}]") for i, child in enumerate(item))
            else:
                stack.extend((child, depth + 1, "") for child in item)
    return None


def _json_clean(value: Any) -> bool:
    """True when ``value`` certainly has no problem, judged on its JSON text at C speed (a walk
    in Python costs ~150 ms for 700 KB of small items); False means "walk it to be sure"."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (ValueError, TypeError, RecursionError):
        return False
    if _NEVER.search(text) or "\\u0000" in text:  # json.dumps writes NUL as \u0000
        return False
    return text.count("[") + text.count("{") <= MAX_JSON_DEPTH or not _too_deep(text)


def json_value_check(
    value: Any,
    *,
    field: str,
    code: str = "INVALID_VALUE",
    number_code: str = "INVALID_TYPE",
    depth_code: str = "JSON_TOO_DEEP",
) -> None:
    """Every string and key of a JSON value is storable text (else ``code``), every number
    finite (else ``number_code``: NaN is not JSON), and the nesting at most MAX_JSON_DEPTH
    (else ``depth_code``). The error's ``detail.field`` is the JSON path of the culprit
    (``data.items[3]``; ``field=""`` for a whole request body)."""
    if _json_clean(value) or _json_problem(value, root=None) is None:
        return
    kind, path, text = _json_problem(value, root=field)  # type: ignore[misc]
    codes = {"text": code, "number": number_code, "depth": depth_code}
    detail: dict[str, Any] = {"field": path}
    if kind == "depth":
        detail["max_depth"] = MAX_JSON_DEPTH
    where = path or "the request body"
    message = f"{where}: {text}" if kind == "text" else f"{where} {text}"
    raise AppError(codes[kind], message, detail=detail)


def _reject_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise AppError("INVALID_JSON", "duplicate key in JSON object", detail={"key": key})
        result[key] = value
    return result


def request_too_large(limit: int | None = None) -> AppError:
    """413: a request body over ``limit`` bytes (AGENTCHAT_MAX_REQUEST_BYTES unless told). The
    one spelling of the refusal, for every reader that bounds a body: the server's request
    class, the ASGI body reader, the REST parser and this module's JSON parser."""
    if limit is None:
        limit = settings.AGENTCHAT_MAX_REQUEST_BYTES
    return AppError(
        "REQUEST_TOO_LARGE", f"request body is over {limit} bytes", detail={"limit": limit}
    )


def request_line_too_long(limit: int) -> AppError:
    """414: a request line (method, target, version) over ``limit`` bytes: the server's
    request class answers it (``agentchat.core.http.webrequest``)."""
    return AppError(
        "REQUEST_LINE_TOO_LONG",
        f"the request line is over {limit} bytes: shorten the URL (its query above all)",
        detail={"limit": limit},
    )


def invalid_header(what: str) -> AppError:
    """400: a header line HTTP does not allow (``what`` says how): the server's request class
    answers it, before any application code (``agentchat.core.http.webrequest``)."""
    return AppError(
        "INVALID_HEADER",
        f"a header is not valid HTTP: {what}; header names are tokens (letters, digits, "
        "!#$%&'*+-.^_`|~) and values hold no NUL, CR, LF, VT, FF, FS, GS, RS or NEL (0x85)",
    )


def malformed_request(what: str) -> AppError:
    """400: a request line or body framing that is not HTTP/1.1 (``what`` says how)."""
    return AppError("MALFORMED_REQUEST", f"the request is not valid HTTP/1.1: {what}")


def headers_too_large(limit: int) -> AppError:
    """431: a header line, or the request line and headers together, over ``limit`` bytes."""
    return AppError(
        "HEADERS_TOO_LARGE",
        f"the request's headers are over {limit} bytes (one line, or all of them)",
        detail={"limit": limit},
    )


def json_loads_strict(raw: bytes) -> Any:
    """Parse a request body. Raises REQUEST_TOO_LARGE, INVALID_JSON (bad UTF-8 or syntax,
    duplicate keys), INVALID_TEXT (a lone surrogate or NUL in any string or key), JSON_TOO_DEEP.
    NaN/Infinity literals parse; fields refuse them with their own codes (e.g.
    LEASE_INVALID_DURATION)."""
    if len(raw) > settings.AGENTCHAT_MAX_REQUEST_BYTES:
        raise request_too_large()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AppError("INVALID_JSON", f"request body is not UTF-8: {exc.reason}") from None
    # Bound the depth before parsing: the parser recurses, and a deep value that parses would
    # still fail every later encode. Fewer brackets than the limit cannot nest deeper.
    if text.count("[") + text.count("{") > MAX_JSON_DEPTH and _too_deep(text):
        raise AppError(
            "JSON_TOO_DEEP",
            f"request body is nested deeper than {MAX_JSON_DEPTH} levels",
            detail={"max_depth": MAX_JSON_DEPTH},
        )
    try:
        value = json.loads(text, object_pairs_hook=_reject_duplicate_keys)
    except (ValueError, RecursionError) as exc:
        raise AppError("INVALID_JSON", f"request body is not valid JSON: {exc}") from None
    if _RISKY_ESCAPE.search(text):
        json_value_check(value, field="", code="INVALID_TEXT")
    return value


# A string, or an unterminated one to the end of the body: always one linear match, even over
# a body of escaped quotes that never closes (without the optional quote the engine retried at
# every quote, quadratic in the body, under the GIL).
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?')
_BRACKETS = re.compile(r"[\[\]{}]")
_BRACKET_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _too_deep(text: str) -> bool:
    """Whether brackets outside JSON strings nest deeper than MAX_JSON_DEPTH (linear)."""
    brackets = _BRACKETS.findall(_JSON_STRING.sub("", text))
    return max(accumulate(map(_BRACKET_STEP.__getitem__, brackets)), default=0) > MAX_JSON_DEPTH


@overload
def int_parse(
    raw: str | None,
    *,
    field: str,
    code: str,
    minimum: int = 0,
    maximum: int | None = None,
    default: int,
) -> int: ...


@overload
def int_parse(
    raw: str | None,
    *,
    field: str,
    code: str,
    minimum: int = 0,
    maximum: int | None = None,
    default: None = None,
) -> int | None: ...


def int_parse(
    raw: str | None,
    *,
    field: str,
    code: str,
    minimum: int = 0,
    maximum: int | None = None,
    default: int | None = None,
) -> int | None:
    """An integer written in ASCII digits (no sign, at most MAX_INT_DIGITS) within
    [minimum, maximum]; ``default`` when ``raw`` is None or empty. Raises ``code``."""
    if raw is None or raw == "":
        return default
    value: int | None = None
    if len(raw) <= MAX_INT_DIGITS and raw.isascii() and raw.isdigit():
        value = int(raw)
    if value is None or value < minimum or (maximum is not None and value > maximum):
        bound = f" and at most {maximum}" if maximum is not None else ""
        raise AppError(
            code,
            f"{field} must be an integer of at least {minimum}{bound}, in ASCII digits",
            detail={"field": field, "value": raw[:40]},
        )
    return value


# A JSON number without a sign, in ASCII: what a client's float prints (0.2754364421974968,
# 1e-05) is a number too. Bounded in length, so float() has little to do.
_DECIMAL = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,20})?(?:[eE][+-]?[0-9]{1,3})?")


def number_parse(
    raw: str | None,
    *,
    field: str,
    code: str,
    minimum: float = 0.0,
    maximum: float | None = None,
    default: float | None = None,
) -> float | None:
    """A number of seconds and the like, written as a JSON number without a sign in ASCII
    (``12``, ``12.5``, ``1e-05``; ``float()`` would also take ``١٢``, ``1_0``, ``nan`` and
    surrounding spaces), finite, within [minimum, maximum]; ``default`` when ``raw`` is None or
    empty. Raises ``code``."""
    if raw is None or raw == "":
        return default
    value = float(raw) if _DECIMAL.fullmatch(raw) else None
    if (
        value is None
        or not math.isfinite(value)
        or value < minimum
        or (maximum is not None and value > maximum)
    ):
        bound = f" and at most {maximum:g}" if maximum is not None else ""
        raise AppError(
            code,
            f"{field} must be a number of at least {minimum:g}{bound}, in ASCII digits",
            detail={"field": field, "value": raw[:40]},
        )
    return value
