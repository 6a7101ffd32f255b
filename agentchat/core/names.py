"""Name rules shared by every app.

Agent names follow the HTTP v1 identity rule (1-64 of ``a-z 0-9 . _ -``, starting and ending
with a letter or digit). Channel names, task ids and the like follow the reference CLI's
record-id rule ``[A-Za-z0-9][A-Za-z0-9._-]*`` so that a synced folder stays readable by it.
"""

from __future__ import annotations

import re

from agentchat.core.errors import AppError

AGENT_NAME_RE = re.compile(r"^[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?$")
RECORD_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
CHANNEL_NAME_MAX = 64
# Reserved so that a channel name can never collide with a folder-level file of the sync.
_RESERVED_CHANNEL_NAMES = {"state.md"}


def is_agent_name(value: object) -> bool:
    return isinstance(value, str) and AGENT_NAME_RE.match(value) is not None


def check_agent_name(value: object, *, field: str = "name", code: str = "INVALID_NAME") -> str:
    if not is_agent_name(value):
        raise AppError(
            code,
            f"{field} must be 1-64 of a-z, 0-9, '.', '_', '-', starting and ending with a "
            "letter or digit",
            detail={"field": field, "value": value if isinstance(value, str) else None},
        )
    return value  # type: ignore[return-value]


def is_record_id(value: object, *, max_length: int) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= max_length
        and RECORD_ID_RE.match(value) is not None
    )


def check_channel_name(value: object, *, field: str = "name") -> str:
    if not is_record_id(value, max_length=CHANNEL_NAME_MAX) or value in _RESERVED_CHANNEL_NAMES:
        raise AppError(
            "INVALID_NAME",
            f"channel {field} must match [A-Za-z0-9][A-Za-z0-9._-]* and be at most "
            f"{CHANNEL_NAME_MAX} characters",
            detail={"field": field, "value": value if isinstance(value, str) else None},
        )
    return value  # type: ignore[return-value]
