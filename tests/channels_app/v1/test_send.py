"""POST /v1/agents/<id>/messages: the envelope exactly as the HTTP v1 document spells it, ids,
idempotent retries, the sizes and the refusals (each changing nothing)."""

from __future__ import annotations

import json
import re

import pytest

from channels_app.models import Channel, Delivery, Message
from tests.errors import error_code

DOC_REQUEST = {
    "to": "bob",
    "conversation_id": "task-42",
    "correlation_id": "request-7",
    "text": "Please inspect this result",
    "data": {"artifact": "s2://agent-chat/artifacts/result-7", "priority": 2},
    "content_type": "application/vnd.example.handoff+json",
    "metadata": {"trace_id": "abc123"},
}
CREATED_AT = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\Z")


def send(client, body, agent="alice"):
    return client.post(f"/v1/agents/{agent}/messages", body, format="json")


def send_raw(client, raw: bytes, agent="alice"):
    return client.generic(
        "POST", f"/v1/agents/{agent}/messages", raw, content_type="application/json"
    )


def nothing_stored():
    return (Message.objects.count(), Delivery.objects.count()) == (0, 0)


def test_the_documents_request_gives_the_documents_envelope(alice, bob):
    r = send(alice, DOC_REQUEST)
    assert r.status_code == 201
    envelope = r.json()
    assert list(envelope) == [
        "schema",
        "id",
        "kind",
        "from",
        "to",
        "conversation_id",
        "correlation_id",
        "created_at",
        "message",
        "metadata",
    ]
    assert re.fullmatch(r"msg_[0-9a-f]{32}", envelope.pop("id"))
    assert CREATED_AT.fullmatch(envelope.pop("created_at"))
    assert envelope == {
        "schema": "agent-chat/envelope.v1",
        "kind": "message",
        "from": "alice",
        "to": "bob",
        "conversation_id": "task-42",
        "correlation_id": "request-7",
        "message": {
            "text": "Please inspect this result",
            "data": {"artifact": "s2://agent-chat/artifacts/result-7", "priority": 2},
            "content_type": "application/vnd.example.handoff+json",
        },
        "metadata": {"trace_id": "abc123"},
    }


def test_omitted_values_are_null_ids_generated_and_metadata_empty(alice, bob):
    envelope = send(alice, {"to": "bob"}).json()
    assert re.fullmatch(r"conv_[0-9a-f]{32}", envelope["conversation_id"])
    assert envelope["correlation_id"] is None
    assert envelope["message"] == {"text": None, "data": None, "content_type": None}
    assert envelope["metadata"] == {}
    # null and omitted are one; "" is a text of its own
    assert (
        send(alice, {"to": "bob", "text": None, "metadata": None}).json()["message"]["text"] is None
    )
    assert send(alice, {"to": "bob", "text": ""}).json()["message"]["text"] == ""


def test_the_returned_envelope_is_the_stored_one(alice, bob):
    sent = send(alice, {**DOC_REQUEST, "text": "  two\nlines  "}).json()
    stored = bob.get("/v1/agents/bob/inbox").json()["deliveries"][0]["envelope"]
    assert stored == sent
    assert stored["message"]["text"] == "  two\nlines  "  # never trimmed


def test_a_retry_with_the_same_id_and_content_returns_the_stored_envelope(alice, bob):
    body = {**DOC_REQUEST, "id": "req:7.a_b-c"}
    first = send(alice, body)
    again = send(alice, {**body, "from": "alice"})  # `from` is no content
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json() == first.json()
    assert first.json()["id"] == "req:7.a_b-c"
    assert Delivery.objects.count() == 1
    assert bob.get("/v1/agents/bob/inbox").json()["tail"] == 1
    # omitted conversation_id: the retry is the same request, the generated id stays
    plain = send(alice, {"to": "bob", "id": "plain"}).json()
    assert send(alice, {"to": "bob", "id": "plain"}).json() == plain


@pytest.mark.parametrize(
    "change",
    [{"text": "other"}, {"to": "carol"}, {"metadata": {"trace_id": "x"}}, {"data": None}],
)
def test_the_same_id_with_other_content_is_id_conflict(alice, bob, carol, change):
    body = {**DOC_REQUEST, "id": "req-7"}
    assert send(alice, body).status_code == 201
    r = send(alice, {**body, **change})
    assert (r.status_code, error_code(r)) == (409, "ID_CONFLICT")
    assert Delivery.objects.count() == 1


def test_ids_are_unique_per_sender_so_no_agent_takes_anothers(alice, bob, carol):
    # carol cannot squat the id alice will use
    assert send(carol, {"to": "bob", "id": "handoff-1"}, "carol").status_code == 201
    r = send(alice, {"to": "bob", "id": "handoff-1", "text": "mine"})
    assert r.status_code == 201
    assert r.json()["from"] == "alice"
    assert Delivery.objects.filter(envelope_id="handoff-1").count() == 2


@pytest.mark.parametrize("bad", ["", "a b", "..", ".", "x" * 129, "caf\u00e9", "a/b", 7])
def test_a_malformed_id_is_refused(alice, bob, bad):
    r = send(alice, {"to": "bob", "id": bad})
    assert error_code(r) in {"INVALID_VALUE", "INVALID_TYPE"}
    assert nothing_stored()


def test_from_must_be_the_paths_and_tokens_agent(alice, bob):
    r = send(alice, {"to": "bob", "from": "bob"})
    assert (r.status_code, error_code(r)) == (403, "SENDER_MISMATCH")
    assert nothing_stored()
    assert send(alice, {"to": "bob", "from": "alice"}).status_code == 201


def test_another_agents_path_is_forbidden(alice, bob):
    r = send(bob, {"to": "alice", "text": "as alice"}, agent="alice")
    assert (r.status_code, error_code(r)) == (403, "FORBIDDEN")
    r = send(bob, {"to": "alice"}, agent="nobody")
    assert (r.status_code, error_code(r)) == (403, "FORBIDDEN")
    assert nothing_stored()


def test_to_is_one_existing_agent(alice):
    r = send(alice, {"to": "zed"})
    assert (r.status_code, error_code(r)) == (404, "AGENT_NOT_FOUND")
    assert error_code(send(alice, {})) == "MISSING_FIELD"
    assert error_code(send(alice, {"to": ["zed"]})) == "INVALID_TYPE"
    assert error_code(send(alice, {"to": "Zed!"})) == "INVALID_NAME"
    assert nothing_stored()


def test_an_unknown_field_is_refused(alice, bob):
    r = send(alice, {"to": "bob", "body": "channel spelling"})
    assert (r.status_code, error_code(r)) == (400, "UNKNOWN_FIELD")
    assert r.json()["error"]["detail"]["fields"] == ["body"]
    assert nothing_stored()


def test_text_and_data_are_each_limited_to_512_kib(alice, bob, settings):
    limit = settings.AGENTCHAT_MAX_FIELD_BYTES
    assert limit == 512 * 1024
    # bytes, not characters: 2-byte characters
    r = send(alice, {"to": "bob", "text": "é" * (limit // 2 + 1)})
    assert (r.status_code, error_code(r)) == (413, "FIELD_TOO_LARGE")
    # data as compact JSON: {"k":"..."} is 8 bytes more than the string
    r = send(alice, {"to": "bob", "data": {"k": "x" * (limit - 7)}})
    assert (r.status_code, error_code(r)) == (413, "FIELD_TOO_LARGE")
    assert nothing_stored()
    assert send(alice, {"to": "bob", "data": {"k": "x" * (limit - 8)}}).status_code == 201
    assert send(alice, {"to": "bob", "text": "é" * (limit // 2)}).status_code == 201


def test_a_body_over_768_kib_is_refused(alice, bob):
    raw = json.dumps({"to": "bob", "text": "x" * 400_000, "data": "y" * 400_000}).encode()
    r = send_raw(alice, raw)
    assert (r.status_code, error_code(r)) == (413, "REQUEST_TOO_LARGE")
    assert nothing_stored()


@pytest.mark.parametrize(
    ("metadata", "code"),
    [
        ({f"k{i}": "v" for i in range(65)}, "INVALID_VALUE"),
        ({"k" * 129: "v"}, "INVALID_VALUE"),
        ({"é" * 65: "v"}, "INVALID_VALUE"),  # 130 bytes
        ({"k": "v" * 4097}, "INVALID_VALUE"),
        ({"k": 1}, "INVALID_TYPE"),
        ({"k": None}, "INVALID_TYPE"),
        ({"": "v"}, "INVALID_VALUE"),
        ({"a\nb": "v"}, "INVALID_VALUE"),
        ({"a\u202eb": "v"}, "INVISIBLE_CHARACTER"),
        (["k", "v"], "INVALID_TYPE"),
    ],
)
def test_metadata_is_a_bounded_map_of_strings(alice, bob, metadata, code):
    r = send(alice, {"to": "bob", "metadata": metadata})
    assert error_code(r) == code
    assert nothing_stored()


def test_metadata_at_its_bounds_is_taken(alice, bob):
    metadata = {f"{i:03d}" + "k" * 125: "v" * 4096 for i in range(64)}
    assert send(alice, {"to": "bob", "metadata": metadata}).json()["metadata"] == metadata


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        (b'{"to": "bob", "text": "\\ud800"}', "INVALID_TEXT"),
        (b'{"to": "bob", "text": "a\\u0000b"}', "INVALID_TEXT"),
        (b'{"to": "bob", "metadata": {"\\udfff": "v"}}', "INVALID_TEXT"),
        (b'{"to": "bob", "conversation_id": "a\\u0007b"}', "INVALID_VALUE"),
        (b'{"to": "bob", "conversation_id": "a\\u200db"}', "INVISIBLE_CHARACTER"),
        (b'{"to": "bob", "correlation_id": ""}', "INVALID_VALUE"),
        (b'{"to": "bob", "correlation_id": "   "}', "INVALID_VALUE"),
        (b'{"to": "bob", "content_type": "a\\u2028b"}', "INVALID_VALUE"),
        (b'{"to": "bob", "id": "a\\u001bb"}', "INVALID_VALUE"),
        (b'{"to": "bob", "data": {"k": "\\ud83d"}}', "INVALID_TEXT"),
        (b'{"to": "bob", "data": NaN}', "INVALID_TYPE"),
        (b'{"to": "bob", "to": "carol"}', "INVALID_JSON"),
        (b'{"to": "bob", "data": ' + b"[" * 70 + b"]" * 70 + b"}", "JSON_TOO_DEEP"),
        (b'["to", "bob"]', "INVALID_JSON"),
        (b"\xff\xfe", "INVALID_JSON"),
    ],
)
def test_hostile_strings_are_refused_with_a_stable_code(alice, bob, raw, code):
    r = send_raw(alice, raw)
    assert error_code(r) == code
    assert r.status_code < 500
    assert nothing_stored()


def test_text_keeps_what_a_body_may_hold(alice, bob):
    text = "tab\there\r\nRTL \u202e and ZWJ \u200d stay in a text"
    assert send(alice, {"to": "bob", "text": text}).json()["message"]["text"] == text


def test_data_is_any_json_value(alice, bob):
    for data in ([1, "two", None], "plain", 3.5, False, {"nested": {"deep": [{}]}}):
        assert send(alice, {"to": "bob", "data": data}).json()["message"]["data"] == data


def test_the_admin_token_is_refused_by_agent_endpoints(alice, bob, api_client, settings):
    admin = "admin-" + "s" * 32
    settings.AGENTCHAT_ADMIN_TOKEN = admin
    api_client.credentials(HTTP_AUTHORIZATION=f"Bearer {admin}")
    for r in (
        send(api_client, {"to": "bob"}),
        api_client.get("/v1/agents/alice/inbox"),
        api_client.get("/api/v1/me/"),
        api_client.get("/api/v1/channels/"),
    ):
        assert (r.status_code, error_code(r)) == (403, "ADMIN_TOKEN_NOT_ALLOWED")
        assert admin not in r.content.decode()  # never echoed
    assert nothing_stored()
    assert Channel.objects.count() == 0


def test_a_channel_message_never_reaches_an_inbox(alice, bob):
    alice.post("/api/v1/channels/", {"name": "review"}, format="json")
    r = alice.post("/api/v1/channels/review/messages/", {"title": "hi", "to": "bob"}, format="json")
    assert r.status_code == 201
    assert bob.get("/v1/agents/bob/inbox").json() == {
        "deliveries": [],
        "next_cursor": 0,
        "tail": 0,
    }
