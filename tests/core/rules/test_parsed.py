"""``Parsed``: a value parsed at the boundary, or the refusal its parse earned, raised only when
the service asks for the value."""

from __future__ import annotations

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.parsed import Parsed


def positive(value: object) -> int:
    if not isinstance(value, int) or value <= 0:
        raise AppError("INVALID_VALUE", "must be positive", detail={"value": str(value)})
    return value


def test_a_value_that_parses_is_kept():
    parsed = Parsed.of(positive, 5)
    assert (parsed.refused, parsed.get()) == (False, 5)
    assert Parsed.ok(None).get() is None


def test_a_refusal_is_kept_and_raised_only_when_the_value_is_asked_for():
    parsed = Parsed.of(positive, -1)  # nothing raised yet
    assert parsed.refused
    with pytest.raises(AppError) as info:
        parsed.get()
    assert (info.value.code, info.value.detail) == ("INVALID_VALUE", {"value": "-1"})


def test_any_other_exception_is_a_bug_and_propagates_at_once():
    def broken(value: object) -> int:
        raise KeyError(value)

    with pytest.raises(KeyError):
        Parsed.of(broken, 1)


def test_a_parsed_value_cannot_be_changed():
    parsed = Parsed.ok(1)
    with pytest.raises(AttributeError):
        parsed._value = 2
    assert parsed.get() == 1
