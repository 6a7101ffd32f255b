"""The folder's message, _meta and cursor files against the reference CLI's own: the reference
writes them (``init``, ``post``), we render rows holding the same fields, and the bytes agree."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest

from agentchat.folder import render
from channels_app.models import Channel, Message
from tests.reference import ref, require_reference


def test_slug_is_the_references():
    assert render.slug("Standup 09:30 ✓ — Ünïcode & emoji 🚀 ok") == "standup-09-30-n-code-emoji-ok"
    assert render.slug("Ünïcödé 日本語 ✓") == "n-c-d"
    assert render.slug("") == "msg"
    assert render.slug("✓✓") == "msg"
    assert render.slug("Alice Smith") == "alice-smith"
    assert render.slug("path.locked 8d955984f2df4a4aaddcaba3ad36ffff") == (
        "path-locked-8d955984f2df4a4aaddcaba3ad36"
    )
    assert render.slug("a" * 39 + " b") == "a" * 39  # cut at 40, then no trailing dash


def _message(**fields: object) -> Message:
    defaults: dict[str, object] = {
        "id": "msg_" + "0" * 32,
        "seq": 1,
        "sender": "alice",
        "to": [],
        "reply_to": None,
        "status": "discussion",
        "title": "hello",
        "body": "",
    }
    defaults.update(fields)
    return Message(**defaults)


def test_frontmatter_order_and_extras():
    message = _message(
        id="client-7",
        to=["bob", "carol"],
        reply_to=3,
        ts=datetime.fromisoformat("2026-11-29T15:40:43.5+00:00"),
        conversation_id="c-1",
        data={"b": 1, "a": "é"},
        metadata={"k": "two\nlines"},
        frontmatter=[["type", "decision"], ["zeta", "x"]],
        body="  indented\n\n",
    )
    assert render.message_text(message, channel="room") == (
        "---\n"
        "seq: 1\n"
        "from: alice\n"
        "to: bob,carol\n"
        "reply_to: 3\n"
        "channel: room\n"
        "ts: 2026-11-29T15:40:43+00:00\n"
        "status: discussion\n"
        "title: hello\n"
        "id: client-7\n"
        "conversation_id: c-1\n"
        'data: {"a":"é","b":1}\n'
        'metadata: {"k":"two\\nlines"}\n'
        "type: decision\n"
        "zeta: x\n"
        "---\n"
        "  indented\n"
    )


def test_a_kept_ts_spelling_and_an_empty_status_are_written_as_the_reference_reads_them():
    message = _message(
        ts=datetime.fromisoformat("2026-11-29T16:40:43+01:00"),
        ts_text="2026-11-29T16:40:43+01:00",
        status="",
        title="",
    )
    text = render.message_text(message, channel="room")
    assert "ts: 2026-11-29T16:40:43+01:00\n" in text
    assert "status: discussion\n" in text
    assert "title: \n" in text
    assert render.message_name(message) == "0001-alice-msg.md"


def test_cursor_files_keep_the_higher_seq_of_agents_sharing_a_slug():
    files = render.cursor_files([("Bob", 3), ("bob", 9), ("BOB!", 5), ("carol", 0)])
    assert files == {".cursors/bob.txt": b"9", ".cursors/carol.txt": b"0"}


def _reference_message(path: Path) -> dict[str, str]:
    head = path.read_text(encoding="utf-8").split("---\n", 2)[1]
    return dict(line.split(": ", 1) for line in head.splitlines())


POSTS = [
    ["--from", "alice", "--title", "Schema v0.2", "--body", "first\n\n  body  \n"],
    ["--from", "bob", "--title", "Re: Schema v0.2", "--to", "alice,carol", "--reply", "1",
     "--status", "ack", "--body", "Looks good"],
    ["--from", "Alice Smith", "--title", 'Title: with "quotes" and colon', "--body", "x"],
    ["--from", "carol", "--title", "multi\nline\r\ntitle", "--body", "   "],
    ["--from", "dave", "--title", "Standup 09:30 ✓ — Ünïcode & emoji 🚀 ok", "--body", "é"],
]  # fmt: skip


@pytest.mark.django_db
def test_messages_and_meta_are_the_bytes_the_reference_writes(tmp_path):
    require_reference()
    ref(tmp_path, "init", "room", "--members", "bob, alice", "--topic", "Ünïcödé: the topic")
    for post in POSTS:
        ref(tmp_path, "post", "room", *post)
    folder = tmp_path / "room"
    meta = (folder / "_meta.json").read_bytes()
    channel = Channel(
        name="room",
        topic="Ünïcödé: the topic",
        members=["bob", "alice"],
        created_at=datetime.fromisoformat(json.loads(meta)["created"]),
    )
    assert render.meta_bytes(channel) == meta

    files = sorted(path for path in folder.iterdir() if render.MESSAGE_NAME.fullmatch(path.name))
    assert len(files) == len(POSTS)
    for seq, (path, post) in enumerate(zip(files, POSTS, strict=True), start=1):
        options = dict(zip(post[::2], post[1::2], strict=True))
        head = _reference_message(path)
        to = options.get("--to")
        message = _message(
            seq=seq,
            sender=options["--from"],
            to=to.split(",") if to else [],
            reply_to=int(options["--reply"]) if "--reply" in options else None,
            ts=datetime.fromisoformat(head["ts"]),
            status=options.get("--status", "discussion"),
            title=options["--title"],
            body=options["--body"],
        )
        assert render.message_name(message) == path.name
        assert render.message_bytes(message, channel="room") == path.read_bytes()
