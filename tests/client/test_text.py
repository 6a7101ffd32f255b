"""The client's message text equals the folder's (``agentchat.folder.render``), byte for byte,
for the same message as the API gives it; the tables' layouts."""

from __future__ import annotations

import pytest

from agentchat.client import text
from agentchat.folder import render
from channels_app import records, services


@pytest.fixture
def channel(db):
    return services.channel_create(name="review", created_by="alice")


@pytest.mark.parametrize(
    "fields",
    [
        {"title": "Schema v0.2", "body": "Please review **this**.\n\n  \n"},
        {"title": "?", "body": ""},
        {"title": "Ünïcödé 日本語 ✓ --- x", "body": "  leading kept", "to": ["bob", "carol"]},
        {
            "title": "full envelope",
            "body": "b",
            "to": "bob",
            "status": "ack",
            "message_id": "client-id-1",
            "conversation_id": "conv-1",
            "correlation_id": "corr-1",
            "content_type": "text/markdown",
            "data": {"z": [1, 2], "a": "é"},
            "metadata": {"k": "v"},
        },
        {"title": "with a server-shaped id", "message_id": "msg_" + "0" * 32},
        {"title": "from a person", "sender_kind": "human"},
    ],
)
def test_message_text_is_the_folders(channel, fields):
    first, _ = services.message_post(channel=channel, sender="alice", title="root")
    message, _ = services.message_post(
        channel=channel, sender="alice", reply_to=first.seq, **fields
    )
    api = records.message_to_dict(message)
    assert text.message_file_text(api) == render.message_text(message, channel="review")
    assert text.message_file_name(api) == render.message_name(message)
    assert text.message_block(api) == (
        "=" * 70 + "\n" + render.message_text(message, channel="review").rstrip() + "\n\n"
    )


def test_slug_is_the_folders():
    for sample in ("Alice Smith", "Standup 09:30 ✓ — Ünïcode & emoji 🚀 ok", "", "x" * 60, "--a--"):
        assert text.slug(sample) == render.slug(sample)


def test_task_table_cuts_long_cells():
    tasks = [
        {"id": "T1", "status": "open", "owner": None, "depends_on": [], "title": "t" * 61},
        {
            "id": "LONGER",
            "status": "in_progress",
            "owner": "bob",
            "depends_on": ["T1"],
            "title": "",
        },
    ]
    assert text.task_table(tasks).splitlines() == [
        "ID      STATUS       OWNER  DEPENDS_ON  TITLE",
        "T1      open         -      -           " + "t" * 57 + "...",
        "LONGER  in_progress  bob    T1          ",
    ]
    assert text.task_table([]) == "ID  STATUS  OWNER  DEPENDS_ON  TITLE\n(no tasks)\n"
