"""One-line fields (names, titles, statuses, topics, reasons) refuse the bidirectional controls
and every invisible format character (Unicode category Cf) with INVISIBLE_CHARACTER, through
the real API; bodies keep them (the dashboard marks them: tests/dashboard/test_markdown.py)."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import INVISIBLE, reason_check, text_check
from channels_app.models import Channel, Message
from tasks_app.models import Task

# The ones named by the rule, and the invisible format characters most used to spoof.
BIDI = ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F))]
BIDI += [chr(c) for c in range(0x2066, 0x206A)]
FORMAT = ["\u00ad", "\u200b", "\u200c", "\u200d", "\u2060", "\u2061", "\u2062", "\u2063"]
FORMAT += ["\u2064", "\ufeff", "\U000e0001", "\U000e0041"]
# Not Cf, but blank-looking: a name of them looks empty or like another name.
BLANK = ["\u3164", "\u115f", "\u1160", "\uffa0", "\u2800", "\u034f", "\u17b4", "\u17b5"]
INVISIBLES = BIDI + FORMAT + BLANK
IDS = [f"U+{ord(c):04X}" for c in INVISIBLES]


def test_the_class_is_every_format_character_unicode_knows():
    every_cf = [c for c in map(chr, range(sys.maxunicode + 1)) if unicodedata.category(c) == "Cf"]
    assert every_cf and all(INVISIBLE.fullmatch(c) for c in every_cf)
    assert not INVISIBLE.search("plain ✓ Ünïcode 🚀 עברית العربية ❤\ufe0f 한글")


def test_an_emojis_variation_selector_is_kept():
    assert text_check("ship it \u2764\ufe0f", field="title", single_line=True)


@pytest.mark.parametrize("char", INVISIBLES, ids=IDS)
def test_the_check_refuses_it_in_one_line_fields_only(char):
    with pytest.raises(AppError) as info:
        text_check(f"a{char}b", field="title", single_line=True)
    assert info.value.code == "INVISIBLE_CHARACTER"
    assert info.value.detail == {"field": "title", "char": f"U+{ord(char):04X}"}
    with pytest.raises(AppError) as info:
        reason_check(f"a{char}b", code="LEASE_INVALID_REASON")
    assert info.value.code == "INVISIBLE_CHARACTER"
    assert text_check(f"a{char}b", field="body") == f"a{char}b"  # a body keeps it


def code_of(response) -> str:
    assert 400 <= response.status_code < 500, response.content
    return response.json()["error"]["code"]


@pytest.fixture
def alice(api_for):
    client = api_for("alice")
    assert client.post("/api/v1/channels/", {"name": "review"}, format="json").status_code == 201
    return client


MESSAGE_FIELDS = ["title", "status", "conversation_id", "correlation_id", "content_type"]


@pytest.mark.django_db
@pytest.mark.parametrize("char", INVISIBLES, ids=IDS)
def test_every_one_line_field_of_the_api_refuses_it(alice, char):
    text = f"de{char}ploy"
    for field in MESSAGE_FIELDS:
        body = {"title": "ok", field: text}
        r = alice.post("/api/v1/channels/review/messages/", body, format="json")
        assert code_of(r) == "INVISIBLE_CHARACTER", field
    r = alice.post("/api/v1/channels/", {"name": "other", "topic": text}, format="json")
    assert code_of(r) == "INVISIBLE_CHARACTER"
    r = alice.patch("/api/v1/channels/review/", {"topic": text}, format="json")
    assert code_of(r) == "INVISIBLE_CHARACTER"
    r = alice.post("/api/v1/channels/review/tasks/", {"id": "T-1", "title": text}, format="json")
    assert code_of(r) == "INVISIBLE_CHARACTER"
    # Names are ASCII by rule: refused as names.
    r = alice.post("/api/v1/channels/", {"name": f"re{char}view"}, format="json")
    assert code_of(r) == "INVALID_NAME"
    assert Message.objects.filter(channel__name="review").count() == 0
    assert Channel.objects.count() == 1 and Task.objects.count() == 0
    assert Channel.objects.get().topic == ""
    posted = alice.post(
        "/api/v1/channels/review/messages/", {"title": "ok", "body": text}, format="json"
    )
    assert posted.status_code == 201 and posted.json()["body"] == text
