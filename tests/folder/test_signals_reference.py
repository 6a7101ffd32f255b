"""Signals and whiteboard audits in a synced folder: each signal is a message file whose
frontmatter says its ``type`` (beside ``status``), the reference CLI (``agent-chat-plugin``)
reads the folder as it reads any (``verify_root.py --strict``, ``peek``, ``read --as``, and
``state`` byte for byte), and an import gives the signals back as signals.

The reference knows no namespaces: its ``read --as alice`` does not show a message addressed
to ``alice.critic`` (ours does); its relevance is otherwise ours, as checked for bob."""

from __future__ import annotations

import json
import shutil
import subprocess
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from agentchat.folder.sync import folder_sync
from channels_app.models import Channel, Message
from tests.folder.rows import channel_files
from tests.folder.test_sync_reference import api_messages, as_printed, ok, printed_messages
from tests.reference import REF_PYTHON, VERIFY_ROOT, ref, require_reference

pytestmark = pytest.mark.django_db


def as_printed_signal(message: dict[str, Any]) -> dict[str, Any]:
    """What the reference prints of one of our messages: a signal's file also says its type."""
    printed = as_printed(message)
    if "type" in message:
        printed["type"] = message["type"]
    return printed


@pytest.fixture
def scenario(api_for) -> dict[str, Any]:
    alice, bob, carol = api_for("alice"), api_for("bob"), api_for("carol")
    critic = api_for("alice")
    critic.credentials(**{**critic._credentials, "HTTP_AGENTCHAT_AS": "alice.critic"})
    ok(alice.post("/api/v1/channels/", {"name": "review", "topic": "signals"}, format="json"), 201)

    def signal(client: Any, to: str, content: str, kind: str) -> str:
        body = {"to": to, "content": content, "type": kind}
        return ok(client.post("/api/v1/channels/review/signals/", body, format="json"), 201)["id"]

    ok(alice.post("/api/v1/channels/review/messages/", {"title": "Kickoff"}, format="json"), 201)
    ids = {
        "query": signal(alice, "bob", "Can you review T-1?\n\nThe schema part.", "query"),
        "warn": signal(carol, "*", "Schema frozen: no migrations", "warn"),
        "delegate": signal(bob, "alice.critic", "Critique the plan", "delegate"),
        "ack": signal(critic, "bob", "ack: on it", "ack"),
        "decision-like": signal(alice, "*", "decision: not a decision, a signal", "inform"),
        "sleep": signal(bob, "*", "All done here", "sleep_event"),
    }
    ok(alice.put("/api/v1/channels/review/whiteboard/goal/", {"value": {"ship": "v1"}},
                 format="json"), 201)  # fmt: skip
    ok(bob.put("/api/v1/channels/review/whiteboard/tmp/", {"value": 1}, format="json"), 201)
    ok(bob.delete("/api/v1/channels/review/whiteboard/tmp/"))
    ok(bob.post("/api/v1/channels/review/signals/ack/", {"ids": [ids["query"]]}, format="json"))
    return {"alice": alice, "bob": bob, "carol": carol, "critic": critic, "ids": ids}


def test_a_signal_file_says_its_type(scenario, tmp_path):
    folder_sync(root=tmp_path)
    [path] = (tmp_path / "review").glob("0002-*.md")
    assert path.name == "0002-alice-can-you-review-t-1.md"
    lines = path.read_text().split("\n")
    assert lines[:9] == [
        "---",
        "seq: 2",
        "from: alice",
        "to: bob",
        "channel: review",
        lines[5],
        "status: query",
        "title: Can you review T-1?",
        "type: query",
    ]
    assert lines[9:] == ["---", "Can you review T-1?", "", "The schema part.", ""]
    [broadcast] = (tmp_path / "review").glob("0003-*.md")
    assert "to: all\n" in broadcast.read_text()


def test_the_reference_reads_the_synced_folder(scenario, tmp_path):
    require_reference()
    root = tmp_path / "root"
    folder_sync(root=root)
    result = subprocess.run(
        [str(REF_PYTHON), str(VERIFY_ROOT), str(root), "--strict"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("ALL OK 0")
    ours = api_messages(scenario["alice"])
    assert printed_messages(ref(root, "peek", "review", "-n", "1000").stdout) == [
        as_printed_signal(m) for m in ours
    ]
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    printed = printed_messages(ref(copy, "read", "review", "--as", "bob").stdout)
    read = ok(scenario["bob"].post("/api/v1/channels/review/read/"))["messages"]
    assert printed == [as_printed_signal(m) for m in read]
    assert "Can you review T-1?" in [m["title"] for m in read]


def test_the_references_state_is_ours_with_signals_and_whiteboard_audits(scenario, tmp_path):
    require_reference()
    folder_sync(root=tmp_path)
    alice = scenario["alice"]
    ours_md = alice.get("/api/v1/channels/review/state/", {"format": "md"}).content.decode()
    assert ref(tmp_path, "state", "review").stdout == ours_md
    theirs = json.loads(ref(tmp_path, "state", "review", "--json").stdout)
    ours = alice.get("/api/v1/channels/review/state/").json()
    assert [e["key"] for e in ours.pop("whiteboard")] == ["goal"]
    for summary in (theirs, ours):
        summary.pop("generated_at")
        summary.pop("created_at")
    assert theirs == ours
    # A signal is judged by its file as any message: its title may make it a decision.
    assert [d["seq"] for d in ours["decisions"]] == [6]


def test_an_import_gives_the_signals_back(scenario, tmp_path):
    channel = Channel.objects.get(name="review")
    before = channel_files(channel)
    types = dict(Message.objects.filter(channel=channel).values_list("seq", "signal_type"))
    folder_sync(root=tmp_path, channel="review")
    channel.delete()
    call_command("import_folder", "--root", str(tmp_path), stdout=StringIO())
    channel = Channel.objects.get(name="review")
    assert channel_files(channel) == before
    assert dict(Message.objects.filter(channel=channel).values_list("seq", "signal_type")) == types
    # Imported signals are signals (unread for everyone: read markers are not in a folder).
    listed = scenario["bob"].get("/api/v1/channels/review/signals/").json()["signals"]
    assert [s["type"] for s in listed] == ["query", "warn", "ack", "inform"]


def _tree(root) -> dict[str, bytes]:
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and not path.relative_to(root).parts[0].startswith(".agentchat")
    }


def test_read_markers_are_not_in_the_folder(scenario, tmp_path):
    """Acknowledging signals (SignalRead) writes nothing a sync mirrors: the folder after more
    acks is the folder before them, byte for byte, and no file names a read marker."""
    from channels_app.models import SignalRead

    before = tmp_path / "before"
    folder_sync(root=before)
    ids = scenario["ids"]
    ok(scenario["alice"].post("/api/v1/channels/review/signals/ack/",
                              {"ids": [ids["warn"], ids["sleep"]]}, format="json"))  # fmt: skip
    ok(scenario["critic"].post("/api/v1/channels/review/signals/ack/",
                               {"ids": [ids["delegate"]]}, format="json"))  # fmt: skip
    assert SignalRead.objects.count() == 4
    after = tmp_path / "after"
    folder_sync(root=after)
    assert _tree(after) == _tree(before)
    # A sync of the first folder after the acks has nothing to write either.
    report = folder_sync(root=before)
    assert _tree(before) == _tree(after)
    assert [one.written for one in report.channels] == [0]
    for text in _tree(after).values():
        assert b"read_at" not in text and b"signal_read" not in text.lower()
