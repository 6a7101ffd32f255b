"""A serializer field named like a Python keyword is declared with a trailing underscore."""

from __future__ import annotations

import pytest

from agentchat.core.http.rest import StrictCharField, StrictSerializer
from agentchat.core.rules.errors import AppError
from channels_app.api import serializers as s


class _Sample(StrictSerializer):
    from_ = StrictCharField(required=False)
    class_ = StrictCharField(required=False)
    name_ = StrictCharField(required=False)  # not a keyword: keeps its underscore


def test_a_keyword_field_is_declared_under_the_keyword() -> None:
    assert list(_Sample._declared_fields) == ["from", "class", "name_"]
    assert _Sample.validate_input({"from": "bob", "class": "x"}) == {"from": "bob", "class": "x"}


def test_the_underscored_spelling_is_an_unknown_field() -> None:
    with pytest.raises(AppError) as caught:
        _Sample.validate_input({"from_": "bob"})
    assert caught.value.code == "UNKNOWN_FIELD"


def test_messages_declare_from() -> None:
    assert "from" in s.MessagePostInput._declared_fields
    assert "from" in s.MessageOutput._declared_fields
    assert "from_" not in s.MessagePostInput._declared_fields
