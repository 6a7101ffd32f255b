"""HTTP v1 direct messages in the synced folder: a pair's direct channel is a channel folder whose
message files carry the envelope's fields (kind, ids, conversation and correlation ids, data,
metadata, the inbox position, receipts as replies), deterministic (two syncs byte-identical),
read by the reference's conformance script; and an import of such a folder makes imported
messages, never envelopes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentchat.core.identity.services import agent_get_or_create
from agentchat.folder.load import folder_import
from agentchat.folder.sync import folder_sync
from channels_app import services
from channels_app.envelopes import rfc3339
from channels_app.models import Channel, Delivery, Message
from channels_app.services.contacts import contact_put
from tests.reference import REF_PYTHON, VERIFY_ROOT, require_reference

pytestmark = pytest.mark.django_db


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the sync's own state aside), by relative path."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".agentchat-sync" not in path.parts
    }


@pytest.fixture
def envelopes() -> dict[str, object]:
    alice, bob = agent_get_or_create(name="alice"), agent_get_or_create(name="bob")
    services.channel_create(name="room", created_by="alice")
    asked = services.envelope_send(
        sender=alice,
        to="bob",
        conversation_id="task-42",
        correlation_id="request-7",
        text="Please inspect this result\n\nsecond paragraph",
        data={"artifact": "s2://x/y", "priority": 2},
        content_type="application/vnd.example.handoff+json",
        metadata={"trace_id": "abc123"},
    )
    dataonly = services.envelope_send(
        sender=bob, to="alice", envelope_id="bob-1", conversation_id="task-42", data=[1, 2]
    )
    receipt = services.receipt_send(
        sender=bob, message_id=asked.envelope()["id"], status="processed", detail="Result attached"
    )
    contact_put(owner=alice, contact_id="carol", card={"id": "carol", "display_name": "Carol"})
    share = services.contact_share_send(sender=alice, to="bob", contact_id="carol")
    return {"asked": asked, "dataonly": dataonly, "receipt": receipt, "share": share}


def _files(root: Path, channel: str) -> dict[str, str]:
    return {path.name: path.read_text() for path in sorted((root / channel).glob("[0-9]*.md"))}


def test_the_direct_channel_is_a_folder_whose_files_carry_the_envelopes(tmp_path, envelopes):
    root = tmp_path / "root"
    folder_sync(root=root)
    files = _files(root, "dm.alice.bob")
    assert len(files) == 4
    first, dataonly, receipt, share = files.values()
    asked = envelopes["asked"].envelope()  # type: ignore[attr-defined]
    assert first.startswith("---\nseq: 1\nfrom: alice\nto: bob\nchannel: dm.alice.bob\n")
    for line in (
        "status: message",
        "conversation_id: task-42",
        "correlation_id: request-7",
        "content_type: application/vnd.example.handoff+json",
        'data: {"artifact":"s2://x/y","priority":2}',
        'metadata: {"trace_id":"abc123"}',
        f"envelope_id: {asked['id']}",
        "envelope_kind: message",
        "inbox_seq_num: 0",
        f"delivered_at: {rfc3339(envelopes['asked'].delivery.delivered_at)}",  # type: ignore[attr-defined]
    ):
        assert line in first, line
    assert first.endswith("---\nPlease inspect this result\n\nsecond paragraph\n")
    # A caller's id is the envelope's (the message has one of the server's); no text is null.
    assert "envelope_id: bob-1\n" in dataonly and "envelope_text: null\n" in dataonly
    assert "data: [1,2]" in dataonly and dataonly.endswith("---\n\n")
    # A receipt replies to what it answers, its data says the status.
    assert "reply_to: 1\n" in receipt and "envelope_kind: receipt\n" in receipt
    assert f'"message_id":"{asked["id"]}"' in receipt and '"status":"processed"' in receipt
    assert "inbox_seq_num: 1\n" in receipt  # alice's inbox: bob-1 was its first
    assert "envelope_kind: contact.share\n" in share and '"display_name":"Carol"' in share
    assert (root / "room" / "_meta.json").exists()
    # Every envelope key is there exactly once, in the same order in every file.
    for text in files.values():
        keys = [line.split(":")[0] for line in text.split("---\n")[1].splitlines()]
        envelope_keys = [
            k
            for k in keys
            if k in {"envelope_id", "envelope_kind", "inbox_seq_num", "delivered_at"}
        ]
        assert envelope_keys == ["envelope_id", "envelope_kind", "inbox_seq_num", "delivered_at"]
        assert keys[-4:] == envelope_keys or keys[-5:-1] == envelope_keys


def test_two_syncs_are_byte_identical_and_a_second_one_writes_nothing(tmp_path, envelopes):
    folder_sync(root=tmp_path / "one")
    folder_sync(root=tmp_path / "two")
    assert tree(tmp_path / "one") == tree(tmp_path / "two")
    again = folder_sync(root=tmp_path / "one")
    assert sum(c.written for c in again.channels) == 0
    folder_sync(root=tmp_path / "three", verify=True)
    assert tree(tmp_path / "three") == tree(tmp_path / "one")


def test_verify_root_strict_passes_with_direct_messages(tmp_path, envelopes):
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
    assert "FAIL" not in result.stdout and "dm.alice.bob" in result.stdout


def test_an_imported_rendering_is_imported_messages_never_envelopes(tmp_path, envelopes):
    root = tmp_path / "root"
    folder_sync(root=root)
    before = _files(root, "dm.alice.bob")
    Channel.objects.all().delete()  # the messages and deliveries with them
    assert not Delivery.objects.exists()
    folder_import(root=root)
    channel = Channel.objects.get(name="dm.alice.bob")
    assert channel.direct_pair is None and channel.visibility == "members"
    assert not Delivery.objects.exists()  # no inbox got anything
    rows = list(Message.objects.filter(channel=channel).order_by("seq"))
    assert len(rows) == 4 and all(m.imported and m.sender_kind == "agent" for m in rows)
    assert ["envelope_kind", "message"] in rows[0].frontmatter  # kept as the file's keys
    # Rendered again, the same bytes.
    folder_sync(root=tmp_path / "again")
    assert _files(tmp_path / "again", "dm.alice.bob") == before
    # The pair's next envelope goes to a direct channel of its own, not the imported one.
    sent = services.envelope_send(sender=agent_get_or_create(name="alice"), to="bob", text="new")
    assert sent.message.channel.name != "dm.alice.bob"
    assert sent.message.channel.direct_pair == "alice bob"
    assert Message.objects.filter(channel=channel).count() == 4
