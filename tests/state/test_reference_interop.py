"""The summary against the reference CLI on a synced folder: a scenario built through our API,
written as the reference's folder (``tests/folder/write.py``), then ``agent-chat state`` run on it
prints byte for byte our markdown, and ``state --json`` our JSON (but ``generated_at``, and
``created_at``, which the reference never finds in its own ``_meta.json``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentchat.folder.sync import folder_sync
from channels_app.models import Channel
from tests.reference import ref, require_reference
from tests.state.scenario import CHANNEL, Scenario, imported_message

pytestmark = pytest.mark.django_db


def synced(root: Path, channel: str) -> Path:
    """The channel as ``sync_folder`` writes it under ``root``; returns its folder."""
    folder_sync(root=root, channel=channel)
    return root / channel


def state_md(client, **params):
    response = client.get(f"/api/v1/channels/{CHANNEL}/state/", {"format": "md", **params})
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/markdown; charset=utf-8"
    return response.content.decode("utf-8")


def state_json(client, **params):
    response = client.get(f"/api/v1/channels/{CHANNEL}/state/", params)
    assert response.status_code == 200, response.content
    return response.json()


def compare(root, client):
    ours_md, ours = state_md(client), state_json(client)
    assert ref(root, "state", CHANNEL).stdout == ours_md
    assert ref(root, "state", CHANNEL, "--strict").stdout == ours_md
    theirs = json.loads(ref(root, "state", CHANNEL, "--json").stdout)
    for summary in (theirs, ours):
        assert summary.pop("generated_at")
    assert theirs.pop("created_at") == ""
    assert ours.pop("created_at") == Channel.objects.get(name=CHANNEL).created_at.isoformat(
        timespec="seconds"
    )
    assert theirs == ours


def test_the_references_state_of_a_synced_scenario_is_ours(api_for, frozen, tmp_path):
    require_reference()
    scenario = Scenario(api_for, frozen)
    scenario.build()
    synced(tmp_path, CHANNEL)
    compare(tmp_path, scenario.clients["alice"])


def test_our_compaction_stores_what_the_references_compaction_writes(api_for, frozen, tmp_path):
    require_reference()
    scenario = Scenario(api_for, frozen)
    scenario.build()
    before = synced(tmp_path / "before", CHANNEL)
    alice = scenario.clients["alice"]
    compacted = alice.post(f"/api/v1/channels/{CHANNEL}/compact/", {}, format="json")
    assert compacted.status_code == 201, compacted.content
    snapshot = compacted.json()

    # The reference compacting the same folder: its state.md is our stored markdown, and its
    # audit message ours, but for the time (it stamps its own now).
    out = ref(tmp_path / "before", "compact", CHANNEL, "--as", "alice").stdout
    assert out == (
        f"compacted state for {CHANNEL} -> {CHANNEL}/state.md (open_tasks="
        f"{snapshot['open_tasks_count']}, locks={snapshot['path_locks_count']}, "
        f"decisions={snapshot['decisions_count']})\n"
    )
    assert (before / "state.md").read_text(encoding="utf-8") == snapshot["markdown"]
    last = snapshot["audit_seq"] - 1
    assert f"**Last Message Sequence**: #{last:04d}" in snapshot["markdown"]
    theirs = next(before.glob(f"{snapshot['audit_seq']:04d}-*.md"))
    after = synced(tmp_path / "after", CHANNEL)
    ours = after / theirs.name
    assert ours.exists()
    assert (after / "state.md").read_text(encoding="utf-8") == snapshot["markdown"]  # the sync's

    def without_time(path):
        head, _, body = path.read_text(encoding="utf-8").partition("\n---\n")
        payload = json.loads(body)
        assert payload.pop("compacted_at")
        return [line for line in head.splitlines() if not line.startswith("ts: ")], payload

    assert without_time(ours) == without_time(theirs)

    # And the reference's state of the folder after our compaction is our state now.
    compare(tmp_path / "after", alice)


def test_imported_frontmatter_keys_and_free_text_senders_read_as_in_the_reference(
    api_for, frozen, tmp_path
):
    require_reference()
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "imported", "topic": "   "}, format="json")
    channel = Channel.objects.get(name="imported")
    imported_message(channel, 1, title="plain", body="x", frontmatter=[["type", "DECISION"]])
    imported_message(channel, 2, title="", body="", frontmatter=[["blocker", "yes"]], sender="")
    kept = [["time", "2026-02-01T00:00:00+01:00"], ["evidence", ""]]
    imported_message(channel, 3, title="Evidence: run", body="a\n\nb",
                     ts_text="2026-01-01T00:00:00Z", frontmatter=kept)  # fmt: skip
    imported_message(channel, 5, title="--- dashes", body="x: y", frontmatter=[["k", "a---b"]])
    imported_message(channel, 12, title="# no", body="##Verification\nok", frontmatter=[],
                     status="Verified")  # fmt: skip
    synced(tmp_path, "imported")
    ours = alice.get("/api/v1/channels/imported/state/", {"format": "md"}).content.decode()
    assert "#0012" in ours and "#0001" in ours and "#0002" in ours
    assert ref(tmp_path, "state", "imported").stdout == ours
    theirs = json.loads(ref(tmp_path, "state", "imported", "--json").stdout)
    mine = alice.get("/api/v1/channels/imported/state/").json()
    for key in ("generated_at", "created_at"):
        theirs.pop(key), mine.pop(key)
    assert theirs == mine
