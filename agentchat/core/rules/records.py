"""Record rules shared by tasks and locks (and the folder renderer): timestamp spellings,
durations and expiry. Pure functions.

Spellings are the reference CLI's (REFERENCE-CLI §3.15): messages, ``_meta.json`` and task
create/update times to the second (``2026-11-29T15:46:20+00:00``), lease and lock times with
microseconds (``2026-11-29T15:46:20.123456+00:00``), always UTC with ``+00:00``.

Expiry is computed from the precise clock: a 1 s lease taken at xx.95 lasts one second, not
0.05 s (cutting "now" to the second first did that). Where a record is spelled to the second,
only its spelling is cut.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings

from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError


def ts_seconds(value: datetime) -> str:
    """``2026-11-29T15:46:20+00:00``."""
    return value.astimezone(UTC).isoformat(timespec="seconds")


def ts_micros(value: datetime) -> str:
    """``2026-11-29T15:46:20.123456+00:00``."""
    return value.astimezone(UTC).isoformat(timespec="microseconds")


def ts_parse(text: str) -> datetime | None:
    """A timestamp as the reference reads one: ``datetime.fromisoformat`` with an explicit
    offset (a final ``Z`` included); None for anything else."""
    try:
        parsed = datetime.fromisoformat(text)
    except (TypeError, ValueError):
        return None
    return parsed if parsed.tzinfo is not None else None


def row_time(row: Any, field: str) -> str | None:
    """One of a row's times in its record (a lease's, a lock's): as an import kept it in
    ``row.spellings`` while it names the stored instant, else in microseconds; None stays
    None."""
    value = getattr(row, field)
    return None if value is None else ts_spelled(value, row.spellings, field, ts_micros)


def ts_spelled(
    value: datetime, spellings: dict[str, Any] | None, field: str, spell: Callable[[datetime], str]
) -> str:
    """``value`` as a record spells it: the spelling an import kept for ``field`` (``+01:00``,
    ``Z``, either precision) while it still names this very instant, else ``spell(value)``.
    A write that changes the time makes the kept spelling stale, so it is never re-emitted for
    a time it no longer names, and no service has to remember to drop it."""
    kept = (spellings or {}).get(field)
    if isinstance(kept, str) and ts_parse(kept) == value:
        return kept
    return spell(value)


# The shortest lease or lock: a shorter one cannot be told apart from "now" in the records'
# microseconds and is over before its owner could renew it (1e-300 s was granted, and expired).
MIN_LEASE_SECONDS = 0.001


def max_lease_seconds() -> float:
    return float(settings.AGENTCHAT_MAX_LEASE_SECONDS)


def _shown(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, (bool, int, float)) or value is None:
        return value
    return str(value)[:100]


@dataclass(frozen=True)
class Duration:
    """A lease or lock duration as a request gave it, parsed at the boundary
    (``Duration.parse``): its seconds when it is a JSON number, else None. Whether it is a
    duration the server grants is judged only where it is used (``duration_check``,
    ``expiry_after``), because the reference judges durations last, after identity, target and
    state: a bad duration never hides a conflict, and the maximum is the setting of the moment."""

    seconds: float | None
    shown: Any  # the value as an error quotes it

    @classmethod
    def parse(cls, value: object) -> Duration:
        """Any JSON value (a boolean, a string, null are no number: refused when used)."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return cls(None, _shown(value))
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        return cls(seconds, _shown(value))


def duration_check(value: Duration | object, *, code: str, field: str = "lease_seconds") -> float:
    """A lease or lock duration: a JSON number (not a boolean, string or null), finite, at
    least MIN_LEASE_SECONDS (1 ms; the reference takes any positive number) and at most
    AGENTCHAT_MAX_LEASE_SECONDS (default 24 h: a lease nobody can ever recover is a denial of
    service). ``value`` is a ``Duration``, or a raw value parsed here. Raises ``code``."""
    duration = value if isinstance(value, Duration) else Duration.parse(value)
    maximum = max_lease_seconds()

    def invalid(message: str) -> AppError:
        return AppError(
            code,
            message,
            detail={
                "field": field,
                "value": duration.shown,
                "min": MIN_LEASE_SECONDS,
                "max": maximum,
            },
        )

    seconds = duration.seconds
    if seconds is None:
        raise invalid(f"{field} must be a number of seconds")
    if math.isnan(seconds) or seconds <= 0:
        raise invalid(f"{field} must be positive")
    if seconds < MIN_LEASE_SECONDS:
        raise invalid(f"{field} must be at least {MIN_LEASE_SECONDS:g} seconds")
    if seconds > maximum:
        raise invalid(f"{field} must be at most {maximum:g} seconds")
    return seconds


def is_expired(expires_at: datetime, now: datetime | None = None) -> bool:
    """The reference's comparison for leases and locks alike: expired when the expiry is at or
    before ``now`` (default: the precise clock, ``agentchat.core.rules.clock.now``)."""
    return expires_at <= (clock.now() if now is None else now)


def seen_changed(
    current: tuple[str, datetime], expected_owner: str | None, expected_expiry: datetime | None
) -> bool:
    """The admin's compare-and-set of a lease or lock (``agentchat.core.admin_actions``): act
    only on it as it was shown (its owner and expiry), not on whoever holds it by the time the
    form is posted. False when nothing was shown (a caller that is not the admin's form)."""
    if expected_owner is None and expected_expiry is None:
        return False
    return current != (expected_owner, expected_expiry)


def _beyond_calendar(code: str, field: str, seconds: float) -> AppError:
    return AppError(
        code,
        f"{field} is outside the supported timestamp range",
        detail={"field": field, "value": seconds},
    )


def expiry_after(
    now: datetime, seconds: Duration | object, *, code: str, field: str = "lease_seconds"
) -> datetime:
    """``now + seconds`` from the precise ``now``. Raises ``code`` (see ``duration_check``;
    also when the maximum is set so high that the expiry is past the calendar's end)."""
    duration = duration_check(seconds, code=code, field=field)
    try:
        return now + timedelta(seconds=duration)
    except (OverflowError, ValueError):
        raise _beyond_calendar(code, field, duration) from None


def duration_parse(value: Any, *, code: str, field: str = "lease_seconds") -> timedelta:
    """A JSON duration (``duration_check``) as the ``timedelta`` that ``expiry_add`` adds,
    rounded to the microsecond as ``expiry_after`` rounds it. Raises ``code``, also for a
    maximum set beyond what a ``timedelta`` holds (the message of a past-the-calendar
    expiry)."""
    seconds = duration_check(value, code=code, field=field)
    try:
        return timedelta(seconds=seconds)
    except (OverflowError, ValueError):
        raise _beyond_calendar(code, field, seconds) from None


def expiry_add(
    now: datetime, duration: timedelta, *, code: str, field: str = "lease_seconds"
) -> datetime:
    """``now + duration`` (a parsed ``duration_parse``). Raises ``code`` when the expiry is
    past the calendar's end."""
    try:
        return now + duration
    except (OverflowError, ValueError):
        raise _beyond_calendar(code, field, duration.total_seconds()) from None
