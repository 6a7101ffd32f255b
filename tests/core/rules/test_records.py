"""The floor's record rules: spellings, durations, expiry from the precise clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.records import (
    duration_check,
    duration_parse,
    expiry_add,
    expiry_after,
    ts_micros,
    ts_seconds,
)

AT = datetime(2026, 11, 29, 15, 46, 20, 950000, tzinfo=UTC)


def test_spellings_are_the_references():
    assert ts_seconds(AT) == "2026-11-29T15:46:20+00:00"
    assert ts_micros(AT) == "2026-11-29T15:46:20.950000+00:00"
    other_zone = AT.astimezone(timezone(timedelta(hours=2)))
    assert ts_micros(other_zone) == "2026-11-29T15:46:20.950000+00:00"


def test_expiry_is_counted_from_the_precise_clock():
    # A 1 s lease taken at xx.95 lasts one second (cut to the second it lasted 0.05 s).
    assert expiry_after(AT, 1, code="LEASE_INVALID_DURATION") == AT + timedelta(seconds=1)
    assert expiry_after(AT, 0.25, code="LEASE_INVALID_DURATION") == AT + timedelta(seconds=0.25)


@pytest.mark.parametrize(
    "value",
    [0, -1, 0.0, float("nan"), float("inf"), True, None, "5", [5], 10**400, 2.5e11, 1e-300,
     5e-324, 0.0009999],
)  # fmt: skip
def test_durations_are_positive_finite_numbers_within_the_maximum(value):
    with pytest.raises(AppError) as info:
        duration_check(value, code="PATH_LOCK_INVALID_DURATION")
    assert info.value.code == "PATH_LOCK_INVALID_DURATION"


def test_the_shortest_lease_is_a_millisecond():
    # Shorter ones could not be told from "now" in microseconds: they were granted, expired.
    assert duration_check(0.001, code="LEASE_INVALID_DURATION") == 0.001


def test_the_maximum_is_a_setting(settings):
    assert duration_check(86400, code="LEASE_INVALID_DURATION") == 86400.0
    settings.AGENTCHAT_MAX_LEASE_SECONDS = 60
    with pytest.raises(AppError):
        duration_check(61, code="LEASE_INVALID_DURATION")
    assert duration_check(60, code="LEASE_INVALID_DURATION") == 60.0


def test_an_expiry_past_the_calendar_is_refused_not_a_crash(settings):
    settings.AGENTCHAT_MAX_LEASE_SECONDS = 1e300
    with pytest.raises(AppError) as info:
        expiry_after(AT, 1e200, code="LEASE_INVALID_DURATION")
    assert info.value.code == "LEASE_INVALID_DURATION"


def test_leases_and_locks_expire_by_one_rule_at_their_expiry():
    from datetime import UTC, datetime, timedelta

    from agentchat.core.rules.records import is_expired

    at = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    assert is_expired(at, at)  # the reference's "<=": expired at the expiry itself
    assert not is_expired(at + timedelta(microseconds=1), at)


@pytest.mark.parametrize("seconds", [1, 0.25, 0.0012345, 86400, 3599.9999995])
def test_a_parsed_duration_gives_the_expiry_expiry_after_gives(seconds):
    duration = duration_parse(seconds, code="LEASE_INVALID_DURATION")
    assert expiry_add(AT, duration, code="LEASE_INVALID_DURATION") == expiry_after(
        AT, seconds, code="LEASE_INVALID_DURATION"
    )


@pytest.mark.parametrize("value", [0, -1, float("nan"), True, None, "5", 1e-9, 86400.5])
def test_a_duration_parse_refuses_what_duration_check_refuses(value):
    with pytest.raises(AppError) as parsed:
        duration_parse(value, code="LEASE_INVALID_DURATION")
    with pytest.raises(AppError) as checked:
        duration_check(value, code="LEASE_INVALID_DURATION")
    assert (parsed.value.message, parsed.value.detail) == (
        checked.value.message,
        checked.value.detail,
    )


def test_durations_past_the_calendar_are_refused_at_parse_or_at_expiry(settings):
    settings.AGENTCHAT_MAX_LEASE_SECONDS = 1e300
    message = "lease_seconds is outside the supported timestamp range"
    with pytest.raises(AppError) as info:
        duration_parse(1e200, code="LEASE_INVALID_DURATION")  # beyond any timedelta
    assert (info.value.message, info.value.detail["value"]) == (message, 1e200)
    duration = duration_parse(1e12, code="LEASE_INVALID_DURATION")  # a timedelta, past 9999
    with pytest.raises(AppError) as info:
        expiry_add(AT, duration, code="LEASE_INVALID_DURATION")
    assert (info.value.message, info.value.detail["value"]) == (message, 1e12)
