"""The summary against the reference's own sample folder: fed the fixture's files, our fold
and renderer give the ``state.md`` the reference wrote at its compaction, and what the
reference's ``state`` prints for the folder now (markdown and JSON)."""

from __future__ import annotations

import json

import pytest

from agentchat.state.markdown import state_markdown
from tests.reference import ref, require_reference
from tests.state.fixture import extract, folder_summary


@pytest.fixture
def fixture_root(tmp_path):
    return extract(tmp_path)


@pytest.mark.parametrize("channel", ["backend", "design"])
def test_the_fixture_state_md_is_our_markdown_of_its_sources_before_the_audit(
    fixture_root, channel
):
    folder = fixture_root / channel
    written = (folder / "state.md").read_text(encoding="utf-8")
    compacted = max(int(p.name.split("-", 1)[0]) for p in folder.glob("[0-9]*-*.md"))
    # state.md was written before its state.compacted audit (the last message) was posted.
    assert f"**Last Message Sequence**: #{compacted - 1:04d}" in written
    assert state_markdown(folder_summary(folder, upto=compacted - 1)) == written


def test_the_fixture_covers_every_section(fixture_root):
    summary = folder_summary(fixture_root / "backend")
    assert [len(summary[key]) for key in ("decisions", "open_tasks", "blockers")] == [1, 3, 3]
    assert len(summary["path_locks"]) == 1
    assert sorted(summary["owners"]) == ["bob", "carol"]
    assert [item["source_type"] for item in summary["verification"]] == ["message", "task"]
    # The "verified by" actor of the done task is the sender of its lease.completed audit.
    assert summary["verification"][1]["author"] == "bob"


@pytest.mark.parametrize("channel", ["backend", "design"])
def test_the_references_state_of_the_fixture_is_ours(fixture_root, channel):
    require_reference()
    folder = fixture_root / channel
    ours = folder_summary(folder)
    assert ref(fixture_root, "state", channel).stdout == state_markdown(ours)
    theirs = json.loads(ref(fixture_root, "state", channel, "--json").stdout)
    assert theirs.pop("generated_at")
    ours.pop("generated_at")
    assert theirs == ours
    strict = json.loads(ref(fixture_root, "state", channel, "--json", "--strict").stdout)
    strict.pop("generated_at")
    assert strict == ours
