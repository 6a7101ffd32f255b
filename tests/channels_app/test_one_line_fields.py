"""A channel's topic is one line, like a title: control characters (C0, DEL, C1, so escape
sequences too) and the line and paragraph separators are refused on create and update, while a
reference folder's topic, which the reference CLI writes as it was given, still imports. An
event's harness and detail refuse the separators, which the shipped schema's control ranges
leave out; the other one-line fields already refuse all of them."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from channels_app.models import Channel
from tests.errors import error_code

pytestmark = pytest.mark.django_db

NOT_ONE_LINE = [
    "\x1b]0;T\x07",
    "a\x01b",
    "a\nb",
    "a\rb",
    "a\x7fb",
    "a\x9bb",
    "a\x0bb",
    "a\x85b",
    "a\u2028b",
    "a\u2029b",
]


@pytest.fixture
def room(alice):
    r = alice.post("/api/v1/channels/", {"name": "room", "topic": "fine ✓"}, format="json")
    assert r.status_code == 201
    return "room"


@pytest.mark.parametrize("topic", NOT_ONE_LINE)
def test_a_topic_with_a_line_break_or_control_is_refused(alice, room, topic):
    r = alice.post("/api/v1/channels/", {"name": "other", "topic": topic}, format="json")
    assert r.status_code == 400 and error_code(r) == "INVALID_VALUE"
    assert r.json()["error"]["detail"]["field"] == "topic"
    r = alice.patch(f"/api/v1/channels/{room}/", {"topic": topic}, format="json")
    assert r.status_code == 400 and error_code(r) == "INVALID_VALUE"
    assert not Channel.objects.filter(name="other").exists()
    assert Channel.objects.get(name=room).topic == "fine ✓"


def test_a_reference_folders_multi_line_topic_still_imports(tmp_path: Path):
    folder = tmp_path / "room"
    folder.mkdir()
    topic = "line1\nline2\x1b]0;T\x07"  # what `agent-chat init --topic` writes, as given
    meta = {"channel": "room", "members": ["a", "b"], "topic": topic}
    (folder / "_meta.json").write_text(json.dumps(meta))
    call_command("import_folder", "--root", str(tmp_path), stdout=StringIO())
    assert Channel.objects.get(name="room").topic == topic


@pytest.mark.parametrize("field", ["harness", "detail"])
@pytest.mark.parametrize("separator", ["\u2028", "\u2029"])
def test_an_events_harness_or_detail_with_a_separator_is_refused(alice, room, field, separator):
    body = {"type": "status", "harness": "cursor", "status": "busy", "detail": "ok"}
    body[field] = f"a{separator}b"
    r = alice.post(f"/api/v1/channels/{room}/events/", body, format="json")
    assert r.status_code == 400 and error_code(r) == "EVENT_INVALID_TEXT"
    assert r.json()["error"]["detail"]["field"] == field


@pytest.mark.parametrize("value", ["a\u2028b", "a\u2029b", "a\x85b", "a\x1bb"])
def test_other_one_line_fields_refuse_separators_and_controls(alice, room, value):
    posts = [
        (f"/api/v1/channels/{room}/messages/", {"title": value, "body": "b"}),
        (f"/api/v1/channels/{room}/messages/", {"title": "t", "body": "b", "status": value}),
        (f"/api/v1/channels/{room}/tasks/", {"title": value}),
        (f"/api/v1/channels/{room}/messages/", {"title": "t", "conversation_id": value}),
        (f"/api/v1/channels/{room}/messages/", {"title": "t", "correlation_id": value}),
    ]
    for url, body in posts:
        r = alice.post(url, body, format="json")
        assert r.status_code == 400, (url, body, r.content)
