"""REST behaviour of channels, messages, cursors and marker claims (in-process client)."""

from __future__ import annotations

import json

import pytest

from channels_app.models import Channel, Cursor, MarkerClaim, Message
from tests.errors import error_code

pytestmark = pytest.mark.django_db


@pytest.fixture
def review(alice):
    r = alice.post(
        "/api/v1/channels/",
        {"name": "review", "members": ["alice", "bob"], "topic": "schema"},
        format="json",
    )
    assert r.status_code == 201, r.content
    return r.json()


def post(client, channel="review", **body):
    return client.post(f"/api/v1/channels/{channel}/messages/", body, format="json")


def raw(client, path, payload: bytes, content_type="application/json"):
    return client.generic("POST", path, payload, content_type=content_type)


# --- channels ---------------------------------------------------------------------------------


def test_create_channel_returns_it(review):
    assert review["name"] == "review"
    assert review["members"] == ["alice", "bob"]
    assert review["topic"] == "schema"
    assert review["created_by"] == "alice"
    assert review["last_seq"] == 0


def test_create_existing_channel_fails_even_with_other_case(alice, review):
    for name in ("review", "Review", "REVIEW"):
        r = alice.post("/api/v1/channels/", {"name": name}, format="json")
        assert r.status_code == 409
        assert error_code(r) == "CHANNEL_EXISTS"
    assert Channel.objects.count() == 1


@pytest.mark.parametrize(
    "name", ["", "-x", ".hidden", "_meta", "a/b", "a b", "ü", "x" * 65, "a:b", "..", "state.md"]
)
def test_bad_channel_names_are_refused(alice, name):
    r = alice.post("/api/v1/channels/", {"name": name}, format="json")
    assert r.status_code == 400
    assert error_code(r) == "INVALID_NAME"
    assert not Channel.objects.exists()


def test_channel_name_at_64_chars_is_accepted(alice):
    assert alice.post("/api/v1/channels/", {"name": "a" * 64}, format="json").status_code == 201


def test_bad_member_name_is_refused(alice):
    r = alice.post("/api/v1/channels/", {"name": "x", "members": ["Bob"]}, format="json")
    assert (r.status_code, error_code(r)) == (400, "INVALID_NAME")


def test_list_shows_topic_members_last_seq_and_unread(alice, bob, review):
    post(alice, title="to bob", to="bob")
    post(alice, title="to carol", to="carol")
    post(alice, title="all")
    post(bob, title="own")
    [channel] = bob.get("/api/v1/channels/").json()["channels"]
    assert channel["last_seq"] == 4
    assert channel["unread"] == 2  # directed + broadcast; not carol's, not his own
    assert channel["cursor"] == 0
    assert channel["topic"] == "schema"
    assert channel["members"] == ["alice", "bob"]


def test_list_counts_unread_per_channel_in_one_query(alice, bob, assert_max_queries):
    for name in ("c1", "c2", "c3"):
        assert alice.post("/api/v1/channels/", {"name": name}, format="json").status_code == 201
    for i in range(3):
        post(alice, channel="c1", title=f"all {i}")
    post(alice, channel="c2", title="to bob", to="bob")
    post(alice, channel="c2", title="to carol", to="carol")
    assert bob.post("/api/v1/channels/c1/ack/", {"seq": 2}, format="json").status_code == 200
    with assert_max_queries(3):  # authentication, then the list
        listed = bob.get("/api/v1/channels/").json()["channels"]
    assert [(c["name"], c["cursor"], c["unread"]) for c in listed] == [
        ("c1", 2, 1),
        ("c2", 0, 1),
        ("c3", 0, 0),
    ]


def test_show_and_update_channel(alice, review):
    r = alice.patch(
        "/api/v1/channels/review/", {"topic": "new", "members": ["carol"]}, format="json"
    )
    assert r.status_code == 200
    assert r.json()["topic"] == "new"
    assert r.json()["members"] == ["carol"]
    shown = alice.get("/api/v1/channels/review/").json()
    assert shown["topic"] == "new"
    assert shown["unread"] == 0


def test_unknown_channel_is_404(alice):
    for r in (
        alice.get("/api/v1/channels/nope/"),
        post(alice, "nope", title="x"),
        alice.post("/api/v1/channels/nope/read/"),
        alice.get("/api/v1/channels/nope/messages/"),
    ):
        assert r.status_code == 404
        assert error_code(r) == "CHANNEL_NOT_FOUND"


# --- posting ----------------------------------------------------------------------------------


def test_post_returns_the_stored_message(alice, review):
    r = post(alice, title="Schema v0.2", body="# hi\n", to="bob", status="proposal")
    assert r.status_code == 201
    m = r.json()
    assert m["seq"] == 1
    assert m["id"].startswith("msg_")
    assert m["channel"] == "review"
    assert m["from"] == "alice"
    assert m["to"] == ["bob"]
    assert m["reply_to"] is None
    assert m["status"] == "proposal"
    assert m["title"] == "Schema v0.2"
    assert m["body"] == "# hi\n"
    assert m["ts"].endswith("+00:00")
    r2 = post(alice, title="re", reply_to=1, to=["bob", "carol"])
    assert r2.json()["seq"] == 2
    assert r2.json()["reply_to"] == 1
    assert r2.json()["to"] == ["bob", "carol"]


@pytest.mark.parametrize("to", [None, "all", "*", [], ["all"], ["*"]])
def test_broadcast_spellings(alice, review, to):
    body = {"title": "x"} if to is None else {"title": "x", "to": to}
    r = alice.post("/api/v1/channels/review/messages/", body, format="json")
    assert r.status_code == 201
    assert r.json()["to"] == []


def test_comma_list_and_duplicates_are_normalized(alice, review):
    assert post(alice, title="x", to="bob, carol,bob").json()["to"] == ["bob", "carol"]


@pytest.mark.parametrize("to", [["all", "bob"], ["Bob"], "bad name", [1], {"a": 1}, ["-x"]])
def test_bad_recipients_are_refused(alice, review, to):
    r = post(alice, title="x", to=to)
    assert r.status_code == 400
    assert error_code(r) in {"INVALID_NAME", "INVALID_TYPE"}
    assert not Message.objects.exists()


@pytest.mark.parametrize("as_list", [True, False])
def test_at_most_a_roster_of_recipients(alice, review, as_list):
    from channels_app.services import RECIPIENTS_MAX

    names = [f"a{n}" for n in range(RECIPIENTS_MAX + 1)]
    r = post(alice, title="x", to=names if as_list else ",".join(names))
    assert (r.status_code, error_code(r)) == (400, "INVALID_VALUE")  # before: 10,000 taken
    assert not Message.objects.exists()
    assert post(alice, title="x", to=names[:-1]).status_code == 201


def test_idempotent_retry_returns_the_first_message(alice, review):
    first = post(alice, title="x", id="client-1")
    again = post(alice, title="different", id="client-1")
    assert first.status_code == 201
    assert again.status_code == 200
    assert again.json() == first.json()
    assert Message.objects.count() == 1
    assert Channel.objects.get().last_seq == 1
    assert post(alice, title="y").json()["seq"] == 2  # no gap


def test_same_id_from_another_sender_or_channel_conflicts(alice, bob, review):
    post(alice, title="x", id="client-1")
    r = post(bob, title="x", id="client-1")
    assert (r.status_code, error_code(r)) == (409, "ID_CONFLICT")
    alice.post("/api/v1/channels/", {"name": "other"}, format="json")
    r = post(alice, "other", title="x", id="client-1")
    assert (r.status_code, error_code(r)) == (409, "ID_CONFLICT")
    assert Message.objects.count() == 1
    assert Channel.objects.get(name="other").last_seq == 0


def test_sender_must_be_the_tokens_agent(alice, review):
    r = post(alice, title="x", **{"from": "bob"})
    assert (r.status_code, error_code(r)) == (403, "SENDER_MISMATCH")
    assert post(alice, title="x", **{"from": "alice"}).status_code == 201


def test_reply_to_must_exist(alice, review):
    for reply_to in (1, 5):
        r = post(alice, title="x", reply_to=reply_to)
        assert (r.status_code, error_code(r)) == (400, "REPLY_TO_NOT_FOUND")
    post(alice, title="x")
    for bad in (0, -1):
        r = post(alice, title="x", reply_to=bad)
        assert r.status_code == 400
    assert Message.objects.count() == 1


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "MISSING_FIELD"),
        ({"title": ""}, "INVALID_VALUE"),
        ({"title": "   "}, "INVALID_VALUE"),
        ({"title": "a\nb"}, "INVALID_VALUE"),
        ({"title": 5}, "INVALID_TYPE"),
        ({"title": None}, "INVALID_TYPE"),
        ({"title": "x", "body": ["a"]}, "INVALID_TYPE"),
        ({"title": "x", "body": "a\x00b"}, "INVALID_TEXT"),
        ({"title": "x", "reply_to": "1"}, "INVALID_TYPE"),
        ({"title": "x", "reply_to": True}, "INVALID_TYPE"),
        ({"title": "x", "reply_to": 1.5}, "INVALID_TYPE"),
        ({"title": "x", "status": ""}, "INVALID_VALUE"),
        ({"title": "x", "id": "bad id"}, "INVALID_VALUE"),
        ({"title": "x", "metadata": {"a": 1}}, "INVALID_TYPE"),
        ({"title": "x", "color": "red"}, "UNKNOWN_FIELD"),
    ],
)
def test_invalid_posts_are_refused_with_a_code_and_change_nothing(alice, review, body, code):
    r = alice.post("/api/v1/channels/review/messages/", body, format="json")
    assert r.status_code == 400, r.content
    assert error_code(r) == code
    assert set(r.json()["error"]) == {"code", "message", "detail"}
    assert not Message.objects.exists()
    assert Channel.objects.get().last_seq == 0


def test_nan_in_data_is_refused(alice, review):
    r = raw(alice, "/api/v1/channels/review/messages/", b'{"title": "x", "data": {"a": NaN}}')
    assert (r.status_code, error_code(r)) == (400, "INVALID_TYPE")


def test_data_and_envelope_fields_round_trip(alice, review):
    m = post(
        alice,
        title="x",
        data={"priority": 2, "list": [1, "a"]},
        content_type="application/json",
        conversation_id="task-42",
        correlation_id="req-7",
        metadata={"trace": "abc"},
    ).json()
    assert m["data"] == {"priority": 2, "list": [1, "a"]}
    assert m["conversation_id"] == "task-42"
    assert m["metadata"] == {"trace": "abc"}


@pytest.mark.parametrize(
    ("payload", "code"),
    [
        (b"{", "INVALID_JSON"),
        (b"[1, 2]", "INVALID_JSON"),
        (b'"x"', "INVALID_JSON"),
        (b'{"title": "a", "title": "b"}', "INVALID_JSON"),
        (b"\xff\xfe{}", "INVALID_JSON"),
        (b"[" * 100000 + b"]" * 100000, "JSON_TOO_DEEP"),
    ],
)
def test_malformed_json_is_400(alice, review, payload, code):
    r = raw(alice, "/api/v1/channels/review/messages/", payload)
    assert (r.status_code, error_code(r)) == (400, code)
    assert not Message.objects.exists()


def test_non_json_content_type_is_415(alice, review):
    r = raw(
        alice, "/api/v1/channels/review/messages/", b"title=x", "application/x-www-form-urlencoded"
    )
    assert (r.status_code, error_code(r)) == (415, "UNSUPPORTED_MEDIA_TYPE")


def test_request_body_over_768_kib_is_413(alice, review):
    payload = json.dumps({"title": "x", "body": "a" * (768 * 1024)}).encode()
    r = raw(alice, "/api/v1/channels/review/messages/", payload)
    assert (r.status_code, error_code(r)) == (413, "REQUEST_TOO_LARGE")
    assert not Message.objects.exists()


def test_body_over_512_kib_is_413_field_too_large(alice, review):
    r = post(alice, title="x", body="é" * (256 * 1024 + 1))  # 512 KiB + 2 bytes in UTF-8
    assert (r.status_code, error_code(r)) == (413, "FIELD_TOO_LARGE")
    r = post(alice, title="x", data={"blob": "a" * (512 * 1024)})
    assert (r.status_code, error_code(r)) == (413, "FIELD_TOO_LARGE")
    assert post(alice, title="x", body="a" * (500 * 1024)).status_code == 201


def test_messages_are_immutable(alice, review):
    post(alice, title="x")
    for method in ("put", "patch", "delete"):
        r = getattr(alice, method)("/api/v1/channels/review/messages/", {}, format="json")
        assert (r.status_code, error_code(r)) == (405, "METHOD_NOT_ALLOWED")


def test_unknown_api_path_is_json_404(alice):
    r = alice.get("/api/v1/nothing/here/")
    assert r.status_code == 404
    assert error_code(r) == "NOT_FOUND"


# --- read / peek / ack ------------------------------------------------------------------------


def test_read_returns_relevant_messages_and_advances_cursor_to_max(alice, bob, review):
    post(alice, title="to bob", to="bob")
    post(alice, title="to carol", to="carol")
    post(bob, title="own")
    post(alice, title="all")
    r = bob.post("/api/v1/channels/review/read/")
    assert r.status_code == 200
    assert [m["title"] for m in r.json()["messages"]] == ["to bob", "all"]
    assert r.json()["cursor"] == 4
    assert Cursor.objects.get(agent__name="bob").seq == 4
    again = bob.post("/api/v1/channels/review/read/").json()
    assert again == {"messages": [], "cursor": 4, "more": False}


def test_read_rejects_a_body_with_fields(bob, review):
    r = bob.post("/api/v1/channels/review/read/", {"x": 1}, format="json")
    assert (r.status_code, error_code(r)) == (400, "UNKNOWN_FIELD")


def test_peek_returns_last_n_or_after_and_never_moves_cursor(alice, bob, review):
    for i in range(1, 8):
        post(alice, title=f"m{i}")
    r = bob.get("/api/v1/channels/review/messages/?limit=3")
    assert [m["seq"] for m in r.json()["messages"]] == [5, 6, 7]
    r = bob.get("/api/v1/channels/review/messages/?after=2&limit=2")
    assert [m["seq"] for m in r.json()["messages"]] == [3, 4]
    r = bob.get("/api/v1/channels/review/messages/")
    assert [m["seq"] for m in r.json()["messages"]] == list(range(1, 8))
    assert r.json()["cursor"] == 0
    assert not Cursor.objects.exists()


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("limit=0", "INVALID_VALUE"),
        ("limit=1001", "INVALID_VALUE"),
        ("limit=x", "INVALID_VALUE"),
        ("after=-1", "INVALID_SEQ"),
        ("after=abc", "INVALID_SEQ"),
    ],
)
def test_peek_bad_parameters(bob, review, query, code):
    r = bob.get(f"/api/v1/channels/review/messages/?{query}")
    assert (r.status_code, error_code(r)) == (400, code)


def test_peek_accepts_limit_1000(alice, bob, review):
    # More messages than the default page of 100: all of them come back, as they were posted.
    posted = [post(alice, title=f"m{i}").json() for i in range(150)]
    bob.post("/api/v1/channels/review/ack/", {"seq": 7}, format="json")
    r = bob.get("/api/v1/channels/review/messages/?limit=1000")
    assert r.status_code == 200, r.content
    assert r.json() == {"messages": posted, "cursor": 7, "more": False}


def test_ack_moves_cursor_without_reading(alice, bob, review):
    for i in range(3):
        post(alice, title=f"m{i}")
    assert bob.post("/api/v1/channels/review/ack/", {"seq": 2}, format="json").json() == {
        "cursor": 2
    }
    assert [m["seq"] for m in bob.post("/api/v1/channels/review/read/").json()["messages"]] == [3]
    assert bob.post("/api/v1/channels/review/ack/", {"seq": 0}, format="json").json() == {
        "cursor": 0
    }
    assert bob.post("/api/v1/channels/review/ack/").json() == {"cursor": 3}


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"seq": 4}, "INVALID_SEQ"),
        ({"seq": -1}, "INVALID_SEQ"),
        ({"seq": "1"}, "INVALID_TYPE"),
        ({"sequence": 1}, "UNKNOWN_FIELD"),
    ],
)
def test_ack_bad_seq(alice, bob, review, body, code):
    post(alice, title="x")
    bob.post("/api/v1/channels/review/ack/", {"seq": 1}, format="json")
    r = bob.post("/api/v1/channels/review/ack/", body, format="json")
    assert (r.status_code, error_code(r)) == (400, code)
    assert Cursor.objects.get(agent__name="bob").seq == 1


# --- marker claims ----------------------------------------------------------------------------


def test_marker_claim_has_one_owner(alice, bob, review):
    r = alice.post("/api/v1/channels/review/claims/task-12.md/")
    assert r.status_code == 201
    assert r.json()["owner"] == "alice"
    r = bob.post("/api/v1/channels/review/claims/task-12.md/")
    assert (r.status_code, error_code(r)) == (409, "MARKER_ALREADY_CLAIMED")
    assert r.json()["error"]["detail"]["owner"] == "alice"
    r = alice.post("/api/v1/channels/review/claims/task-12.md/")
    assert (r.status_code, error_code(r)) == (409, "MARKER_ALREADY_CLAIMED")
    assert MarkerClaim.objects.count() == 1


def test_bad_marker_name(alice, review):
    r = alice.post("/api/v1/channels/review/claims/.hidden/")
    assert (r.status_code, error_code(r)) == (400, "INVALID_NAME")


# --- auth -------------------------------------------------------------------------------------


def test_no_token_bad_token_and_revoked_token_are_401(api_client, make_agent, review):
    r = api_client.get("/api/v1/channels/")
    assert (r.status_code, error_code(r)) == (401, "AUTH_REQUIRED")
    assert r["WWW-Authenticate"].startswith("Bearer")
    r = api_client.get("/api/v1/channels/", HTTP_AUTHORIZATION="Bearer nope")
    assert (r.status_code, error_code(r)) == (401, "AUTH_INVALID")
    r = api_client.get("/api/v1/channels/", HTTP_AUTHORIZATION="Basic abc")
    assert (r.status_code, error_code(r)) == (401, "AUTH_INVALID")
    agent, token = make_agent("dave")
    assert (
        api_client.get("/api/v1/channels/", HTTP_AUTHORIZATION=f"Bearer {token}").status_code == 200
    )
    from agentchat.core.identity.services import token_revoke

    token_revoke(token=agent.tokens.get())
    r = api_client.get("/api/v1/channels/", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert (r.status_code, error_code(r)) == (401, "AUTH_INVALID")
    r = api_client.post(
        "/api/v1/channels/review/messages/",
        {"title": "x"},
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert r.status_code == 401
    assert not Message.objects.exists()


def test_tokens_are_hashed_at_rest(make_agent):
    import hashlib

    from agentchat.core.models import ApiToken

    agent, token = make_agent("erin")
    stored = agent.tokens.get()
    assert stored.digest == hashlib.sha256(token.encode()).hexdigest()
    # The hint is the token's first characters, shown in the admin: a short prefix only.
    assert token.startswith(stored.hint) and len(stored.hint) <= 12 < len(token)
    # No column of the row holds the token, nor enough of it to stand for it.
    row = ApiToken.objects.filter(pk=stored.pk).values().get()
    assert not any(token[:16] in str(value) for value in row.values()), row
