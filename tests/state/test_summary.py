"""The state summary: golden files of a scenario with something in every section, determinism,
the reference's reading of a message file, strict mode, and streaming in chunks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.state import selectors
from agentchat.state.markdown import state_markdown
from agentchat.state.messages import (
    MessageFold,
    body_extract,
    frontmatter_parse,
    message_views,
    text_view,
)
from channels_app.models import Channel, Message
from tests.state.scenario import CHANNEL, Scenario, as_imported, imported_message

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).parent / "golden"
# AGENTCHAT_UPDATE_GOLDEN=1 rewrites the golden files (then read the diff before committing).
UPDATE = os.environ.get("AGENTCHAT_UPDATE_GOLDEN") == "1"


def golden(name: str, actual: bytes) -> None:
    path = GOLDEN / name
    if UPDATE:
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(actual)
    assert actual == path.read_bytes()


def get_state(client, channel=CHANNEL, **params):
    response = client.get(f"/api/v1/channels/{channel}/state/", params)
    assert response.status_code == 200, response.content
    return response


@pytest.fixture
def scenario(api_for, frozen):
    built = Scenario(api_for, frozen)
    built.build()
    return built


def test_the_summary_of_the_scenario_is_its_golden_markdown_and_json(scenario):
    alice = scenario.clients["alice"]
    golden("scenario.md", get_state(alice, format="md").content)
    readable = json.dumps(get_state(alice).json(), indent=2, sort_keys=True, ensure_ascii=False)
    golden("scenario.json", readable.encode() + b"\n")


def test_the_same_data_gives_the_same_bytes(scenario):
    bob = scenario.clients["bob"]
    assert get_state(bob, format="md").content == get_state(bob, format="md").content
    first = get_state(bob).json()
    scenario.clock.advance(3600)  # only generated_at moves with time
    second = get_state(bob).json()
    assert first.pop("generated_at") != second.pop("generated_at")
    assert first == second
    assert get_state(bob, format="md", strict="1").content == get_state(bob, format="md").content


def test_the_json_and_the_markdown_are_one_summary(scenario):
    summary = get_state(scenario.clients["carol"]).json()
    assert list(summary) == sorted(summary)  # keys sorted, as the reference prints them
    markdown = get_state(scenario.clients["carol"], format="md").content.decode()
    assert state_markdown(summary) == markdown


def test_an_empty_channel_has_every_section_empty(api_for):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "quiet"}, format="json")
    # Each section then an empty line, and the file ends with one newline.
    assert get_state(alice, "quiet", format="md").content.decode() + "\n" == (
        "# State: quiet\n\n## Goal & Topic\n- **Channel**: quiet\n- **Topic**: (none)\n"
        "- **Members**: (none)\n- **Last Message Sequence**: #0000\n\n"
        + "".join(
            f"## {section}\n*(none)*\n\n"
            for section in (
                "Decisions",
                "Open Tasks",
                "Blockers",
                "Owners & Leases",
                "Path Locks",
                "Verification Evidence",
            )
        )
    )


# --- the reference's reading of a message file ----------------------------------------------


def test_frontmatter_is_read_as_the_reference_reads_it():
    assert frontmatter_parse("---\na: 1\nno colon\n b : x: y \n---\nbody") == {
        "a": "1",
        "b": "x: y",
    }
    assert frontmatter_parse("---\na: 1\nnever closed\n") == {}
    assert frontmatter_parse("title: x\n---\n") == {}
    assert frontmatter_parse("---\na: 1\na: 2\n  ---  \n") == {"a": "2"}


def test_the_body_follows_the_second_triple_dash_anywhere():
    assert body_extract("---\ntitle: a\n---\n  body\n\n") == "body"
    assert body_extract("---\ntitle: a --- b\n---\nbody") == "b\n---\nbody"
    assert body_extract("no frontmatter at all") == "no frontmatter at all"


def test_a_file_is_read_with_universal_newlines():
    view = text_view(seq=3, stem="0003-a-x", text="---\r\ntitle: x\r\n---\r\none\rtwo\r\n")
    assert view.meta == {"title": "x"}
    assert view.body == "one\ntwo"


def test_title_author_and_time_fall_back_as_the_references_do():
    view = text_view(seq=9, stem="0009-msg-msg", text="---\ntitle:\nts: T1\ntime: T0\n---\nx")
    assert (view.title, view.author, view.time) == ("0009-msg-msg", "unknown", "T0")


def test_extra_frontmatter_keys_classify_as_in_the_reference(api_for):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "imported"}, format="json")
    channel = Channel.objects.get(name="imported")
    imported_message(channel, 1, title="plain", body="b", frontmatter=[["type", "Decision"]])
    imported_message(channel, 2, title="plain", body="b", frontmatter=[["blocker", ""]])
    imported_message(channel, 3, title="plain", body="b",
              frontmatter=[["evidence", "x"], ["time", "2020-01-01T00:00:00Z"]])  # fmt: skip
    imported_message(channel, 4, title="plain", body="b", frontmatter=[["type", "test"]])
    summary = selectors.state_summary(channel=channel)
    assert [item["seq"] for item in summary["decisions"]] == [1]
    assert [item["source_id"] for item in summary["blockers"]] == ["#0002"]
    # Sorted by (time, source_id) as strings: the imported time sorts before the others.
    assert [(item["source_id"], item["time"][:4]) for item in summary["verification"]] == [
        ("3", "2020"),
        ("4", summary["verification"][1]["time"][:4]),
    ]
    assert summary["decisions"][0]["author"] == "Alice Smith"


# --- strict mode ----------------------------------------------------------------------------


def test_strict_mode_refuses_an_event_message_whose_body_is_no_event(api_for):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "events"}, format="json")
    channel = Channel.objects.get(name="events")
    imported_message(channel, 1, title="event:status", body="not json", frontmatter=[],
              status="event.status", kind=Message.Kind.EVENT)  # fmt: skip
    lenient = get_state(alice, "events").json()
    assert lenient["last_seq"] == 1
    response = alice.get("/api/v1/channels/events/state/", {"strict": "1"})
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "STATE_MALFORMED_SOURCE"
    assert error["detail"] == {"seq": 1, "reason": "EVENT_MALFORMED_BODY"}


def test_strict_mode_refuses_a_completion_body_the_reference_cannot_parse(api_for):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "deep"}, format="json")
    posted = alice.post(
        "/api/v1/channels/deep/messages/",
        {"title": "task.updated T-1", "body": "[" * 5000},
        format="json",
    )
    assert posted.status_code == 201
    as_imported("deep", posted.json()["seq"], status="task.updated")
    assert get_state(alice, "deep").json()["verification"] == []  # lenient: no completion
    for strict in ("1", "true"):
        response = alice.get("/api/v1/channels/deep/state/", {"strict": strict})
        assert (response.status_code, response.json()["error"]["code"]) == (
            409,
            "STATE_MALFORMED_SOURCE",
        )
        assert response.json()["error"]["detail"] == {"seq": 1}


def test_a_fold_keeps_the_first_malformed_message_for_strict_mode():
    fold = MessageFold()
    for seq in (5, 6):
        text = "---\nstatus: Task.Updated\n---\n" + "[" * 3000
        fold.feed(text_view(seq=seq, stem="s", text=text))
    assert fold.last_seq == 6 and fold.completion_actors == {}
    assert fold.malformed["detail"] == {"seq": 5}
    with pytest.raises(AppError) as info:
        fold.strict_check()
    assert (info.value.code, info.value.detail) == ("STATE_MALFORMED_SOURCE", {"seq": 5})
    MessageFold().strict_check()  # nothing malformed: nothing raised


# --- streaming ------------------------------------------------------------------------------


def test_messages_stream_in_chunks_to_the_same_fold(scenario):
    channel = Channel.objects.get(name=CHANNEL)
    whole = MessageFold().feed_all(message_views(channel))
    chunked = MessageFold().feed_all(message_views(channel, chunk_size=3))
    assert chunked == whole
    # Folding in two parts (as a compaction does) is folding at once.
    part = MessageFold().feed_all(message_views(channel, chunk_size=2))
    head = MessageFold()
    for view in message_views(channel):
        if view.seq <= 20:
            head.feed(view)
    assert head.feed_all(message_views(channel, after=20)) == part
    assert whole.last_seq == channel.last_seq


def test_the_scenario_covers_every_section(scenario):
    summary = json.loads(get_state(scenario.clients["alice"]).content)
    assert {task["status"] for task in summary["open_tasks"]} == {"open", "in_progress", "blocked"}
    assert {item["kind"] for item in summary["blockers"]} == {
        "message",
        "task_dependency",
        "task_status",
    }
    assert {item["source_type"] for item in summary["verification"]} == {"message", "task"}
    assert len(summary["path_locks"]) == 3 and len(summary["decisions"]) == 5
    verified = {item["source_id"]: item["author"] for item in summary["verification"]}
    assert verified["T-DONE"] == "bob"
    assert verified["T-DONE2"] == "dave"  # the later task.updated post names dave
