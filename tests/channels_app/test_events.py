"""Capability and status events: the shipped schema, the reference's codes in its check order,
and the record shapes (body bytes, the message an event rides in)."""

from __future__ import annotations

import json

import pytest
from jsonschema import Draft202012Validator

from agentchat.core.rules.errors import ERRORS, AppError
from channels_app import events

TS = "2026-11-29T15:46:21+00:00"


def status_event(**fields):
    event = {
        "schema_version": 1,
        "event": "status",
        "agent": "dave",
        "harness": "cursor",
        "ts": TS,
        "status": "busy",
    }
    event.update(fields)
    return {name: value for name, value in event.items() if value is not ...}


def capability_event(**fields):
    event = {
        "schema_version": 1,
        "event": "capability",
        "agent": "alice",
        "harness": "omp",
        "ts": TS,
        "primitives": list(events.PRIMITIVES),
    }
    event.update(fields)
    return {name: value for name, value in event.items() if value is not ...}


def code_of(value, **kwargs):
    with pytest.raises(AppError) as info:
        events.event_validate(value, **kwargs)
    return info.value.code, info.value.message


def test_the_schema_is_a_valid_2020_12_document_with_the_references_top_level():
    schema = events.event_schema()
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["schema_version", "event", "agent", "harness", "ts"]
    assert schema["properties"]["schema_version"]["const"] == 1
    assert schema["properties"]["event"]["enum"] == ["capability", "status"]
    assert schema["$defs"]["primitive"]["enum"] == list(events.PRIMITIVES)
    assert schema["properties"]["status"]["enum"] == list(events.STATUSES)


@pytest.mark.parametrize(
    "event",
    [
        status_event(),
        status_event(status="ready", detail=""),
        status_event(status="stopped", detail="done for today — à demain"),
        status_event(ts="2026-11-29T15:46:21Z"),
        status_event(ts="2026-11-29T16:46:21.123456+01:00"),
        capability_event(),
        capability_event(primitives=["wait"]),
        capability_event(agent="Alice Smith", harness="claude-code"),
        capability_event(schema_version=1.0),  # the reference compares with ==
    ],
)
def test_valid_events_pass_unchanged(event):
    assert events.event_validate(event) == event


@pytest.mark.parametrize(
    ("value", "code", "message"),
    [
        ([], "EVENT_INVALID_RECORD", "event must be an object"),
        ("status", "EVENT_INVALID_RECORD", "event must be an object"),
        (status_event(schema_version=2), "EVENT_UNSUPPORTED_VERSION", None),
        (status_event(schema_version=True), "EVENT_UNSUPPORTED_VERSION", None),
        (status_event(schema_version="1"), "EVENT_UNSUPPORTED_VERSION", None),
        (status_event(schema_version=...), "EVENT_UNSUPPORTED_VERSION", None),
        (status_event(event="heartbeat"), "EVENT_INVALID_TYPE", None),
        (status_event(event=...), "EVENT_INVALID_TYPE", None),
        (status_event(event=["status"]), "EVENT_INVALID_TYPE", None),
        (status_event(zeta=1, alpha=2), "EVENT_UNKNOWN_FIELD", "alpha, zeta"),
        (status_event(primitives=["wait"]), "EVENT_UNKNOWN_FIELD", "primitives"),
        (capability_event(status="busy", detail="x"), "EVENT_UNKNOWN_FIELD", "detail, status"),
        (status_event(agent=...), "EVENT_REQUIRED_FIELD_MISSING", "agent"),
        (status_event(harness=...), "EVENT_REQUIRED_FIELD_MISSING", "harness"),
        (status_event(ts=...), "EVENT_REQUIRED_FIELD_MISSING", "ts"),
        (status_event(agent=""), "EVENT_INVALID_TEXT", None),
        (status_event(agent=7), "EVENT_INVALID_TEXT", None),
        (status_event(harness="a/b"), "EVENT_INVALID_TEXT", None),
        (status_event(harness="a\\b"), "EVENT_INVALID_TEXT", None),
        (status_event(harness="c:"), "EVENT_INVALID_TEXT", None),
        (status_event(harness=".."), "EVENT_INVALID_TEXT", None),
        (status_event(harness="_x"), "EVENT_INVALID_TEXT", None),
        (status_event(harness="x\x85"), "EVENT_INVALID_TEXT", None),
        (status_event(harness="x\n"), "EVENT_INVALID_TEXT", None),
        (status_event(harness="x\ud800"), "EVENT_INVALID_TEXT", None),
        (status_event(ts="2026-11-29T15:46:21"), "EVENT_INVALID_TIMESTAMP", None),
        (status_event(ts="yesterday"), "EVENT_INVALID_TIMESTAMP", None),
        (status_event(ts=1764431181), "EVENT_INVALID_TIMESTAMP", None),
        (capability_event(primitives=...), "EVENT_INVALID_PRIMITIVES", None),
        (capability_event(primitives=[]), "EVENT_INVALID_PRIMITIVES", None),
        (capability_event(primitives="wait"), "EVENT_INVALID_PRIMITIVES", None),
        (capability_event(primitives=["wait", True]), "EVENT_INVALID_PRIMITIVES", None),
        (capability_event(primitives=["wait", "wait"]), "EVENT_DUPLICATE_PRIMITIVE", None),
        (capability_event(primitives=["x", "x"]), "EVENT_DUPLICATE_PRIMITIVE", None),
        (capability_event(primitives=["wait", "mcp"]), "EVENT_UNKNOWN_PRIMITIVE", "mcp"),
        (status_event(status="online"), "EVENT_INVALID_STATUS", "online"),
        (status_event(status=...), "EVENT_INVALID_STATUS", "None"),
        (status_event(status=1), "EVENT_INVALID_STATUS", "1"),
        (status_event(detail="a\nb"), "EVENT_INVALID_TEXT", None),
        (status_event(detail=5), "EVENT_INVALID_TEXT", None),
        (status_event(detail="\x7f"), "EVENT_INVALID_TEXT", None),
    ],
)
def test_each_violation_gets_the_references_code(value, code, message):
    got_code, got_message = code_of(value)
    assert got_code == code
    if message is not None:
        assert got_message == message
    assert ERRORS[code].status == 400 and ERRORS[code].exit == 2


@pytest.mark.parametrize(
    ("value", "code"),
    [
        # Each violation beside every later one: the earliest check in the order wins.
        (
            status_event(schema_version=2, event="x", extra=1, agent="", ts="x", status="no"),
            "EVENT_UNSUPPORTED_VERSION",
        ),
        (status_event(event="x", extra=1, agent="", ts="x", status="no"), "EVENT_INVALID_TYPE"),
        (status_event(extra=1, agent="", ts="x", status="no"), "EVENT_UNKNOWN_FIELD"),
        (status_event(agent="", harness=..., ts="x", status="no"), "EVENT_INVALID_TEXT"),
        (status_event(harness=..., ts=..., status="no"), "EVENT_REQUIRED_FIELD_MISSING"),
        (status_event(ts="x", status="no", detail="\n"), "EVENT_INVALID_TIMESTAMP"),
        (status_event(status="no", detail="\n"), "EVENT_INVALID_STATUS"),
        (capability_event(ts="x", primitives=[1]), "EVENT_INVALID_TIMESTAMP"),
        (capability_event(primitives=["x", "x", 1]), "EVENT_INVALID_PRIMITIVES"),
        (capability_event(primitives=["x", "wait", "wait"]), "EVENT_DUPLICATE_PRIMITIVE"),
        # A type that is none takes only the common fields, but the type is checked first.
        (status_event(event="nope", primitives=["x"]), "EVENT_INVALID_TYPE"),
    ],
)
def test_the_first_check_in_the_references_order_wins(value, code):
    assert code_of(value)[0] == code


def test_agent_is_checked_before_harness():
    assert code_of(status_event(agent="a/b", harness=...)) == (
        "EVENT_INVALID_TEXT",
        code_of(status_event(agent="a/b"))[1],
    )
    assert code_of(status_event(agent=..., harness="a/b"))[1] == "agent"


def test_request_fields_beside_the_event_are_unknown_after_the_type():
    assert code_of(status_event(), extra_unknown=["from"]) == ("EVENT_UNKNOWN_FIELD", "from")
    assert code_of(status_event(b=1), extra_unknown=["a", "c"])[1] == "a, b, c"
    assert code_of(status_event(event="x"), extra_unknown=["a"])[0] == "EVENT_INVALID_TYPE"


@pytest.fixture
def schema_sees(monkeypatch):
    """The instances the JSON Schema validator is shown (its work grows with them)."""
    shown: list[dict] = []
    validator = events._validator()

    class Watching:
        def iter_errors(self, instance):
            shown.append(instance)
            return validator.iter_errors(instance)

    monkeypatch.setattr(events, "_validator", lambda: Watching())
    return shown


def _bounded(instance: dict) -> bool:
    primitives = instance.get("primitives")
    small = not isinstance(primitives, list) or len(primitives) <= len(events.PRIMITIVES) + 1
    return small and len(instance) <= len(events.KNOWN_FIELDS) + 1


@pytest.mark.parametrize(
    ("primitives", "code"),
    [
        (["x"] * 150_000, "EVENT_DUPLICATE_PRIMITIVE"),
        ([1] * 150_000, "EVENT_INVALID_PRIMITIVES"),
        ([1, "a"] * 75_000, "EVENT_INVALID_PRIMITIVES"),
        ([*events.PRIMITIVES, *(f"x{i}" for i in range(150_000))], "EVENT_UNKNOWN_PRIMITIVE"),
        (["wait"] * 9 + [None], "EVENT_INVALID_PRIMITIVES"),  # past the schema's probe
    ],
)
def test_huge_lists_are_judged_whole_showing_the_schema_a_bounded_probe(
    primitives, code, schema_sees
):
    assert code_of(capability_event(primitives=primitives))[0] == code
    # jsonschema alone spent 8 s on the first of these: it is shown a probe of the value,
    # the rest is judged by one linear pass.
    assert schema_sees and all(_bounded(instance) for instance in schema_sees)


def test_many_unknown_fields_are_named_showing_the_schema_a_bounded_probe(schema_sees):
    value = status_event(**{f"k{i:05}": i for i in range(50_000)})
    with pytest.raises(AppError) as info:
        events.event_validate(value)
    assert schema_sees and all(_bounded(instance) for instance in schema_sees)
    assert info.value.code == "EVENT_UNKNOWN_FIELD"
    assert info.value.message.startswith("k00000, k00001, ")
    assert info.value.detail["count"] == 50_000
    assert len(info.value.detail["fields"]) == events.UNKNOWN_SHOWN


# --- record shapes ------------------------------------------------------------------------


def test_the_body_is_byte_for_byte_the_references():
    # REFERENCE-CLI §3.12, the body of design/0008-dave-event-status.md.
    event = events.event_build(type="status", agent="dave", harness="cursor", ts=TS, status="busy")
    assert events.event_body(events.event_validate(event)) == (
        '{"agent":"dave","event":"status","harness":"cursor","schema_version":1,'
        '"status":"busy","ts":"2026-11-29T15:46:21+00:00"}'
    )


def test_the_body_keeps_non_ascii_and_the_message_carries_the_type():
    event = events.event_build(
        type="status", agent="zoé", harness="h", ts=TS, status="idle", detail="café ☕"
    )
    message = events.event_message(event)
    assert message.status == "event.status"
    assert message.title == "event:status"
    assert '"detail":"café ☕"' in message.body
    assert json.loads(message.body) == event


def test_a_capability_event_without_primitives_advertises_all_eight_in_order():
    event = events.event_build(type="capability", agent="alice", harness="omp", ts=TS)
    assert event["primitives"] == [
        "messages",
        "cursors",
        "wait",
        "tasks",
        "dependencies",
        "leases",
        "path_locks",
        "state_summary",
    ]
    assert events.event_message(event).title == "event:capability"


def test_a_stored_body_parses_back_or_is_malformed():
    event = capability_event(primitives=["wait"])
    assert events.event_parse("\n" + events.event_body(event) + "\n", where="#3") == event
    with pytest.raises(AppError) as info:
        events.event_parse("not json", where="#3")
    assert (info.value.code, info.value.message) == ("EVENT_MALFORMED_BODY", "#3")
    # JSON that is no event gets the validator's code, as the reference's `event read`.
    with pytest.raises(AppError) as info:
        events.event_parse("[1]", where="#3")
    assert info.value.code == "EVENT_INVALID_RECORD"


@pytest.mark.parametrize(
    "body",
    [
        {"type": "capability", "harness": "omp"},
        {"type": "capability", "harness": "omp", "primitives": ["wait", "tasks"]},
        {"type": "status", "harness": "omp", "status": "busy"},
        {"type": "status", "harness": "omp", "status": "blocked", "detail": "T-1 café"},
        {"type": "status", "harness": "omp", "status": "idle", "detail": None},
    ],
)
def test_a_parsed_request_makes_the_event_it_was_judged_as(body):
    request = events.event_request_parse(body, agent="alice")
    made = request.event(agent="alice", ts=TS)
    built = events.event_build(agent="alice", ts=TS, **body)
    assert made == built and list(made) == list(built)  # the same keys in the same order
    assert events.event_validate(made) == made


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"type": "nope", "harness": "h", "from": "x"}, "EVENT_INVALID_TYPE"),
        ({"type": "status", "harness": "h", "status": "busy", "from": "x"}, "EVENT_UNKNOWN_FIELD"),
        ({"type": "status", "status": "busy"}, "EVENT_REQUIRED_FIELD_MISSING"),
        ({"type": "status", "harness": "h", "status": "nope"}, "EVENT_INVALID_STATUS"),
        ({"type": "capability", "harness": "h", "primitives": ["x"]}, "EVENT_UNKNOWN_PRIMITIVE"),
        ({"type": "status", "harness": "h\u200b", "status": "busy"}, "INVISIBLE_CHARACTER"),
    ],
)
def test_a_request_is_refused_with_the_references_first_violation(body, code):
    with pytest.raises(AppError) as info:
        events.event_request_parse(body, agent="alice")
    assert info.value.code == code
