"""The state summary within a byte budget (agentchat.state.bounded): the API's answers stay as
they were while they fit, and past AGENTCHAT_STATE_MAX_BYTES shorten their long message texts,
each with the stable marker, the JSON saying ``truncated: true``; past even that, 409
STATE_TOO_LARGE. The folder's state.md (the stored markdown) is never shortened."""

from __future__ import annotations

import json

import pytest

from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from agentchat.models import StateSnapshot
from agentchat.state.api import _sorted
from agentchat.state.bounded import (
    api_marker,
    summary_bounded,
    summary_shortened,
    text_cut,
)
from agentchat.state.markdown import state_markdown
from tests.errors import error_code

pytestmark = pytest.mark.django_db

MARKER = "… [truncated by the server: "


@pytest.fixture
def room(alice):
    assert alice.post("/api/v1/channels/", {"name": "room"}, format="json").status_code == 201
    return alice


def post(client, title: str, body: str = "") -> None:
    r = client.post("/api/v1/channels/room/messages/", {"title": title, "body": body},
                    format="json")  # fmt: skip
    assert r.status_code == 201, r.content


def test_a_summary_that_fits_is_answered_as_before(room, settings):
    post(room, "Decision: go", "yes\n" * 100)
    post(room, "Blocker: wait", "for the build")
    whole_json = room.get("/api/v1/channels/room/state/")
    whole_md = room.get("/api/v1/channels/room/state/", {"format": "md"})
    body = whole_json.json()
    assert "truncated" not in body and "AgentChat-Truncated" not in whole_json
    assert "AgentChat-Truncated" not in whole_md
    # The bytes of today's answer: the summary's keys sorted, its markdown.
    assert whole_json.content == json_bytes(_sorted(body))
    assert whole_md.content.decode() == state_markdown(body)
    # Exactly at the budget: still whole.
    settings.AGENTCHAT_STATE_MAX_BYTES = len(whole_md.content)
    again = room.get("/api/v1/channels/room/state/", {"format": "md"})
    assert again.content == whole_md.content and "AgentChat-Truncated" not in again


def test_past_the_budget_long_texts_are_shortened_with_the_marker(room, settings):
    post(room, "Decision: long", "first line\n" + "x" * 20_000)
    post(room, "Decision: short", "fine")
    post(room, "Blocker: long", "b" * 9000)
    post(room, "Verification: long", "e" * 9000)
    settings.AGENTCHAT_STATE_MAX_BYTES = 12_000
    r = room.get("/api/v1/channels/room/state/")
    assert r.status_code == 200 and r["AgentChat-Truncated"] == "1"
    assert len(r.content) <= 12_000
    body = r.json()
    assert body["truncated"] is True
    long, short = body["decisions"]
    assert long["details"].startswith("first line\n")
    assert long["details"].endswith(
        f"{MARKER}20011 characters in all; the whole text is message #0001]"
    )
    assert short["details"] == "fine"
    (blocker,) = [b for b in body["blockers"] if b["kind"] == "message"]
    assert blocker["details"].endswith("9000 characters in all; the whole text is message #0003]")
    (evidence,) = body["verification"]
    assert evidence["evidence"].endswith("the whole text is message #0004]")
    md = room.get("/api/v1/channels/room/state/", {"format": "md"})
    assert md["AgentChat-Truncated"] == "1" and len(md.content) <= 12_000
    assert md.content.count(MARKER.encode()) == 3
    # The keys and entries are the reference's, only texts changed.
    settings.AGENTCHAT_STATE_MAX_BYTES = 10**9
    whole = room.get("/api/v1/channels/room/state/").json()
    assert set(whole) == set(body) - {"truncated"}
    assert [d["seq"] for d in whole["decisions"]] == [d["seq"] for d in body["decisions"]]


def test_the_shortening_goes_on_to_shorter_texts_until_it_fits():
    summary = {
        "decisions": [{"seq": n, "title": "t", "details": "d" * 5000} for n in range(1, 6)],
        "blockers": [],
        "verification": [],
    }

    def render(s, truncated):
        return json.dumps(s).encode()

    whole, cut = summary_bounded(summary, render, max_bytes=10**6, marker=api_marker)
    assert not cut and whole == render(summary, False)
    for budget, longest in ((24_000, 4096), (8_000, 1024), (3_000, 256), (1_200, 0)):
        body, cut = summary_bounded(summary, render, max_bytes=budget, marker=api_marker)
        assert cut and len(body) <= budget
        details = json.loads(body)["decisions"][0]["details"]
        head = details.split("… [truncated")[0].rstrip()
        assert len(head) <= longest and details.endswith("message #0001]"), budget
    with pytest.raises(AppError) as refused:
        summary_bounded(summary, render, max_bytes=300, marker=api_marker)
    assert refused.value.code == "STATE_TOO_LARGE"
    assert summary["decisions"][0]["details"] == "d" * 5000  # the summary itself unchanged


def test_texts_are_cut_at_a_line_end_or_a_whole_character():
    assert text_cut("short", 10) is None
    assert text_cut("line one\nline two\nline three", 24) == "line one\nline two"
    assert text_cut("é" * 10, 5) == "éé"  # 4 bytes, never half a character
    assert text_cut("x" * 10, 0) == ""
    shortened, cut = summary_shortened(
        {"decisions": [{"seq": 7, "details": "x" * 100}], "blockers": [], "verification": []},
        limit=0,
        marker=api_marker,
    )
    assert cut and shortened["decisions"][0]["details"] == (
        "… [truncated by the server: 100 characters in all; the whole text is message #0007]"
    )


def test_a_summary_over_the_budget_even_shortened_is_refused(room, settings):
    for n in range(20):
        post(room, f"Decision: {'t' * 900} {n}")
    settings.AGENTCHAT_STATE_MAX_BYTES = 4000
    for params in ({}, {"format": "md"}):
        r = room.get("/api/v1/channels/room/state/", params)
        assert (r.status_code, error_code(r)) == (409, "STATE_TOO_LARGE")
        assert r.json()["error"]["detail"]["max_bytes"] == 4000


def test_compaction_stores_the_whole_summary_and_answers_within_the_budget(room, settings):
    post(room, "Decision: long", "y" * 30_000)
    settings.AGENTCHAT_STATE_MAX_BYTES = 8000
    r = room.post("/api/v1/channels/room/compact/", {}, format="json")
    assert r.status_code == 201 and len(r.content) <= 8000
    assert r.json()["truncated"] is True and MARKER in r.json()["markdown"]
    stored = StateSnapshot.objects.get()
    assert "y" * 30_000 in stored.markdown  # the folder's state.md: whole
    assert stored.markdown == state_markdown(stored.summary)
    snap = room.get("/api/v1/channels/room/state/snapshot/")
    assert snap.status_code == 200 and len(snap.content) <= 8000
    assert snap.json()["truncated"] is True
    assert snap.json()["summary"]["decisions"][0]["details"].endswith("message #0001]")
    md = room.get("/api/v1/channels/room/state/snapshot/", {"format": "md"})
    assert md["AgentChat-Truncated"] == "1" and len(md.content) <= 8000
    # Whole again under a larger budget: the stored markdown, byte for byte.
    settings.AGENTCHAT_STATE_MAX_BYTES = 10**9
    md = room.get("/api/v1/channels/room/state/snapshot/", {"format": "md"})
    assert md.content.decode() == stored.markdown and "AgentChat-Truncated" not in md


def test_a_compaction_whose_markdown_cannot_fit_still_says_it_committed(room, settings):
    for n in range(20):
        post(room, f"Decision: {'t' * 900} {n}")
    settings.AGENTCHAT_STATE_MAX_BYTES = 2000
    r = room.post("/api/v1/channels/room/compact/", {}, format="json")
    assert r.status_code == 201
    body = r.json()
    assert (body["markdown"], body["truncated"], body["decisions_count"]) == ("", True, 20)
    assert StateSnapshot.objects.count() == 1
