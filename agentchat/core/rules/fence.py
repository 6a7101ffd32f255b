"""Fencing tokens (docs/tasks.md and docs/locks.md, "Fencing tokens"): the parse of a fence a
client sends, the refusal of a stale one, and the answer of the check endpoints.

A fence is a non-negative integer that only grows per task and per lock, across owners: every
claim and recovery of a task (``Task.fence``), every acquisition and recovery of a path lock
(the channel's ``LockFence``) hands out a larger one. A holder may send the fence it was given
with a mutation; a third system may ask whether a fence is still current. Pure rules: no
database here.
"""

from __future__ import annotations

from typing import Any, Literal

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import int_parse

# 18 digits, as every integer a client sends (validation.MAX_INT_DIGITS): a bigint column
# with room to grow, so the next fence after any accepted one (even one an import restored)
# still fits, and a fence a million times a second lasts 30,000 years.
FENCE_MAX = 10**18 - 1
FIELD = "fence"

State = Literal["current", "expired", "stale"]


def _invalid(shown: str) -> AppError:
    return AppError(
        "INVALID_FENCE",
        f"fence must be an integer from 0 to {FENCE_MAX}",
        detail={"field": FIELD, "value": shown[:40]},
    )


def fence_parse(value: object) -> int:
    """A fence sent in a JSON body: an integer (not a boolean, not ``1.0``, not a string)
    from 0 to FENCE_MAX. Raises INVALID_FENCE."""
    if type(value) is not int or not 0 <= value <= FENCE_MAX:
        raise _invalid(repr(value) if not isinstance(value, str) else value)
    return value


def fence_body_parse(data: dict[str, Any]) -> int | None:
    """The optional ``fence`` of a request body (None when absent). Raises INVALID_FENCE."""
    return fence_parse(data[FIELD]) if FIELD in data else None


def fence_query_parse(raw: str | None) -> int:
    """A fence in a query string: ASCII digits, required. Raises INVALID_FENCE."""
    if raw is None or raw == "":
        raise AppError(
            "INVALID_FENCE", "name the fence to check: ?fence=<integer>", detail={"field": FIELD}
        )
    return int_parse(raw, field=FIELD, code="INVALID_FENCE", maximum=FENCE_MAX, default=0)


def fence_check(given: int | None, current: int, *, subject: dict[str, Any]) -> None:
    """Refuse a mutation carrying a fence that is not ``current`` (nothing when none was
    sent). ``subject`` names the task or lock in the answer. Raises STALE_FENCE."""
    if given is not None and given != current:
        raise AppError(
            "STALE_FENCE",
            f"fence {given} is not the current one ({current}): the lease or lock was taken "
            "over (or recovered) since it was granted",
            detail={**subject, "fence": given, "current_fence": current},
        )


def fence_state(given: int, current: int, *, live: bool) -> State:
    """What a third system learns of ``given``: ``current`` (the live holder's fence),
    ``expired`` (the latest fence, but its lease or lock has expired or ended) or ``stale``
    (any other value: a newer fence exists, or it was never this one's)."""
    if given != current:
        return "stale"
    return "current" if live else "expired"
