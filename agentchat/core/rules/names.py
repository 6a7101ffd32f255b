"""Name rules shared by every app.

Agent names follow the HTTP v1 identity rule (1-64 of ``a-z 0-9 . _ -``, starting and ending
with a letter or digit, no empty segment between dots); a dot makes a sub-agent
(``alice.critic`` is under ``alice``: IASP §2, ``agentchat.relevance``), and the whole dotted
name obeys the rule. Channel names, task ids and the like follow the reference CLI's record-id
rule ``[A-Za-z0-9][A-Za-z0-9._-]*`` so that a synced folder stays readable by it.

Every rule matches the whole string (``fullmatch``; a pattern ending in ``$`` would also accept
a trailing newline, and ``review\\n`` would exist beside ``review``). The patterns end in
``\\Z`` as well, so even a ``.match`` elsewhere cannot accept a prefix.
"""

from __future__ import annotations

import re
from typing import Any

from agentchat.core.rules.errors import AppError

# No empty dot segment (``alice..x``; ``.alice`` and ``alice.`` already fail the edges): a
# dot separates an agent from its sub-agent, and ``alice..x`` would be ``x`` under ``alice.``,
# an agent that cannot exist.
AGENT_NAME_RE = re.compile(r"(?!.*\.\.)[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?\Z")
RECORD_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
CHANNEL_NAME_MAX = 64
# A channel is a folder of the synced tree (and of a checkout on Windows): its name may not be
# a file the folder reserves beside the channels, nor a name Windows cannot create (device
# names with any extension, a trailing dot). Compared ignoring case, as channel names are.
_RESERVED_CHANNEL_NAMES = frozenset({"state.md"})
_WINDOWS_DEVICES = frozenset(
    {"con", "prn", "aux", "nul", "conin$", "conout$"}
    | {f"{base}{digit}" for base in ("com", "lpt") for digit in "0123456789"}
)


# The same rules as ECMA-262 patterns for the OpenAPI document (agentchat.core.http.schema; a test
# checks that they agree with the functions below). ``$`` ends the string there.
AGENT_NAME_PATTERN = r"^(?!.*\.\.)[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$"
RECORD_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"


def any_case(word: str) -> str:
    """A pattern matching ``word`` in any case (Python and ECMA-262 alike)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


# A record id that is neither reserved nor a device name (with any extension), and does not end
# with a dot. Device names that are no record id (``conin$``) need no lookahead.
CHANNEL_NAME_PATTERN = (
    "^(?!(?:{devices})(?:\\.|$))(?!(?:{reserved})$)"
    "[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9_-])?$".format(
        devices="|".join(
            any_case(name) for name in sorted(_WINDOWS_DEVICES) if RECORD_ID_RE.fullmatch(name)
        ),
        reserved="|".join(any_case(name) for name in sorted(_RESERVED_CHANNEL_NAMES)),
    )
)


def is_agent_name(value: object) -> bool:
    return isinstance(value, str) and AGENT_NAME_RE.fullmatch(value) is not None


def check_agent_name(value: object, *, field: str = "name", code: str = "INVALID_NAME") -> str:
    if not is_agent_name(value):
        raise AppError(
            code,
            f"{field} must be 1-64 of a-z, 0-9, '.', '_', '-', starting and ending with a "
            "letter or digit, with no two dots in a row",
            detail={"field": field, "value": value[:100] if isinstance(value, str) else None},
        )
    return value  # type: ignore[return-value]


def is_record_id(value: object, *, max_length: int) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= max_length
        and RECORD_ID_RE.fullmatch(value) is not None
    )


def record_id_check(
    value: object,
    *,
    what: str,
    code: str,
    max_length: int,
    field: str | None = None,
    detail: dict[str, Any] | None = None,
) -> str:
    """``value``, when it is a record id (``RECORD_ID_PATTERN``, at most ``max_length``
    characters). Raises ``code``: "``what`` must match …", its detail ``detail``, else the
    ``field`` and the value cut to 100 characters."""
    if not is_record_id(value, max_length=max_length):
        raise AppError(
            code,
            f"{what} must match [A-Za-z0-9][A-Za-z0-9._-]* and be at most {max_length} characters",
            detail=detail
            if detail is not None
            else {"field": field, "value": value[:100] if isinstance(value, str) else None},
        )
    return value  # type: ignore[return-value]


def channel_name_problem(value: str) -> str | None:
    """Why a record-id-shaped ``value`` cannot name a channel folder, or None."""
    lowered = value.lower()
    if lowered in _RESERVED_CHANNEL_NAMES:
        return f"{value!r} is reserved by the synced folder"
    if lowered.split(".", 1)[0] in _WINDOWS_DEVICES:
        return f"{value!r} is a reserved device name on Windows"
    if value.endswith("."):
        return "a channel name may not end with a dot"
    return None


def check_channel_name(value: object, *, field: str = "name") -> str:
    """Raises INVALID_NAME."""
    what = f"channel {field}"
    record_id_check(value, what=what, code="INVALID_NAME", max_length=CHANNEL_NAME_MAX, field=field)
    problem = channel_name_problem(value)  # type: ignore[arg-type]
    if problem is not None:
        raise AppError("INVALID_NAME", problem, detail={"field": field, "value": value})
    return value  # type: ignore[return-value]
