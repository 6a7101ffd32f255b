"""Events against the reference CLI itself (``agent-chat-plugin`` 0.7.5): its ``event read``
parses the bodies we post, its ``event post`` writes the bytes we write, and its validator gives
the code ours gives for a few thousand hostile events.

The reference runs as ``tests.reference`` finds it (skipped without it, failing under CI).
"""

from __future__ import annotations

import json
import random
import subprocess

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.folder import render
from channels_app import events
from channels_app.models import Message
from tests.reference import REF_PYTHON, ref, require_reference

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def reference_installed() -> None:
    require_reference()


def test_the_references_event_read_parses_the_events_we_post(api_for, tmp_path):
    alice, bob = api_for("alice"), api_for("bob")
    assert alice.post("/api/v1/channels/", {"name": "room"}, format="json").status_code == 201
    alice.post("/api/v1/channels/room/events/", {"type": "capability", "harness": "omp"},
               format="json")  # fmt: skip
    bob.post(
        "/api/v1/channels/room/events/",
        {"type": "status", "harness": "codex", "status": "blocked", "detail": "waiting on é ☕"},
        format="json",
    )
    ours = bob.get("/api/v1/channels/room/events/").json()["events"]
    ref(tmp_path, "init", "room")
    for message in Message.objects.select_related("channel").order_by("seq"):
        path = tmp_path / "room" / render.message_name(message)
        path.write_bytes(render.message_bytes(message, channel="room"))

    every = ref(tmp_path, "event", "read", "room").stdout.splitlines()
    assert [json.loads(line) for line in every] == [item["event"] for item in ours]
    statuses = ref(tmp_path, "event", "read", "room", "--type", "status").stdout.splitlines()
    assert [json.loads(line)["status"] for line in statuses] == ["blocked"]


def test_the_references_event_post_writes_the_bytes_we_write(tmp_path):
    ref(tmp_path, "init", "room")
    ref(tmp_path, "event", "post", "room", "--from", "zoé", "--type", "status", "--harness",
        "cursor", "--status", "idle", "--detail", "à demain ☕")  # fmt: skip
    ref(tmp_path, "event", "post", "room", "--from", "dave", "--type", "capability",
        "--harness", "omp", "--primitives", "wait,leases")  # fmt: skip
    bodies = [
        path.read_text(encoding="utf-8").split("---", 2)[2].strip()
        for path in sorted((tmp_path / "room").glob("000*.md"))
    ]
    assert len(bodies) == 2
    for body in bodies:
        event = json.loads(body)
        built = events.event_build(
            type=event["event"],
            agent=event["agent"],
            harness=event["harness"],
            ts=event["ts"],
            primitives=event.get("primitives"),
            status=event.get("status"),
            detail=event.get("detail"),
        )
        assert events.event_body(events.event_validate(built)) == body


_REF_CODES = """
import json, sys
import chat
for line in sys.stdin:
    try:
        chat.validate_adapter_event(json.loads(line))
        print(json.dumps(None))
    except chat.AdapterEventError as error:
        print(json.dumps([error.code, str(error).split(": ", 1)[1]]))
"""

_VALUES = {
    "schema_version": [1, 1.0, True, 2, "1", None],
    "event": ["capability", "status", "x", None, ["status"]],
    "agent": ["a", "", ".a", "_a", "a/b", "a:b", "a\\b", "..", "a\x01", "a\x9f", "a\ud800", 5],
    "harness": ["h", "", "_h", "h\n", 3.0, None, "Alice Smith"],
    "ts": [
        "2026-11-29T15:46:21+00:00",
        "2026-11-29T15:46:21Z",
        "2026-11-29T15:46:21",
        "2026-11-29 15:46:21+01:00",
        "20261129T154621+0000",
        "nope",
        5,
    ],
    "primitives": [
        ["messages"],
        [],
        ["wait", "wait"],
        ["x"],
        [1],
        ["wait", 1],
        "wait",
        None,
        list(events.PRIMITIVES),
        ["x"] * 10,
        [1, *["a"] * 10],
    ],
    "status": ["ready", "busy", "x", None, 1],
    "detail": ["", "ok", "a\nb", 5, None, "\u2028", "x\ud800"],
    "extra": [1],
}


def test_our_codes_are_the_references_for_thousands_of_hostile_events():
    rng = random.Random(20261201)
    own = {"capability": {"primitives"}, "status": {"status", "detail"}}
    values = []
    for _ in range(4000):
        value = {}
        for name, choices in _VALUES.items():
            kind = value.get("event")
            if name in ("schema_version", "event", "agent", "harness", "ts"):
                chance = 0.97
            elif name in own.get(kind if isinstance(kind, str) else "", ()):
                chance = 0.9
            else:
                chance = 0.03
            if rng.random() < chance:
                value[name] = rng.choice(choices) if rng.random() < 0.25 else choices[0]
        values.append(value)
    run = subprocess.run(
        [str(REF_PYTHON), "-c", _REF_CODES],
        input="".join(json.dumps(value) + "\n" for value in values),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    theirs = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(theirs) == len(values)
    seen = set()
    for value, expected in zip(values, theirs, strict=True):
        try:
            events.event_validate(value)
            got = None
        except AppError as error:
            got = [error.code, error.message]
        if expected is not None and expected[0] not in (
            "EVENT_UNKNOWN_FIELD",
            "EVENT_REQUIRED_FIELD_MISSING",
            "EVENT_UNKNOWN_PRIMITIVE",
            "EVENT_INVALID_STATUS",
        ):
            got, expected = got and got[:1], expected[:1]  # other messages are our own words
        assert got == expected, value
        seen.add(expected and expected[0])
    assert len(seen) == 11  # valid, and each of the ten codes an object can get
