"""Receipts, contacts, contact shares and their acceptance, the address book (HTTP v1)."""

from __future__ import annotations

import pytest

from channels_app.models import ContactEvent, Delivery
from tests.errors import error_code

CARD = {
    "id": "carol",
    "display_name": "Carol",
    "endpoint": "https://agents.example.net",
    "capabilities": ["research"],
    "public_key": "did:key:z6Mk",
    "labels": {"team": "discovery"},
}


def post(client, path, body=None):
    return client.post(path, body, format="json")


def send(client, frm, to, **fields):
    r = post(client, f"/v1/agents/{frm}/messages", {"to": to, **fields})
    assert r.status_code == 201, r.content
    return r.json()


def deliveries(client, agent):
    return client.get(f"/v1/agents/{agent}/inbox?limit=1000").json()["deliveries"]


def receipt(client, agent, body):
    return post(client, f"/v1/agents/{agent}/receipts", body)


# --- receipts --------------------------------------------------------------------------------


def test_a_receipt_is_a_new_envelope_in_the_original_senders_inbox(alice, bob):
    original = send(alice, "alice", "bob", text="inspect", conversation_id="task-42")
    before = deliveries(bob, "bob")
    r = receipt(
        bob,
        "bob",
        {
            "to": "alice",
            "message_id": original["id"],
            "status": "processed",
            "detail": "Result attached",
            "conversation_id": "task-42",
        },
    )
    assert r.status_code == 201
    sent = r.json()
    assert (sent["kind"], sent["from"], sent["to"]) == ("receipt", "bob", "alice")
    assert sent["message"] == {
        "text": None,
        "data": {"message_id": original["id"], "status": "processed", "detail": "Result attached"},
        "content_type": None,
    }
    assert sent["conversation_id"] == "task-42"
    assert [d["envelope"] for d in deliveries(alice, "alice")] == [sent]
    assert deliveries(bob, "bob") == before  # the original never changes


def test_a_receipt_takes_each_status_and_the_originals_conversation(alice, bob):
    original = send(alice, "alice", "bob", conversation_id="c-1")
    for status in ("delivered", "processed", "read", "rejected"):
        sent = receipt(bob, "bob", {"message_id": original["id"], "status": status}).json()
        assert sent["message"]["data"]["status"] == status
        assert sent["message"]["data"]["detail"] is None
        assert sent["conversation_id"] == "c-1"  # the original's when omitted
    r = receipt(bob, "bob", {"message_id": original["id"], "status": "done"})
    assert (r.status_code, error_code(r)) == (400, "INVALID_VALUE")


def test_a_receipt_answers_its_message_in_the_direct_channel(alice, bob):
    original = send(alice, "alice", "bob", text="question")
    receipt(bob, "bob", {"message_id": original["id"], "status": "read"})
    messages = bob.get("/api/v1/channels/dm.alice.bob/messages/").json()["messages"]
    assert [(m["status"], m["reply_to"]) for m in messages] == [("message", None), ("receipt", 1)]
    assert messages[1]["title"] == "receipt: read"


def test_a_receipt_for_a_message_never_received_is_404(alice, bob, carol):
    original = send(alice, "alice", "bob", text="for bob")
    for who, body in (
        (alice, {"message_id": original["id"], "status": "read"}),  # she sent it
        (carol, {"message_id": original["id"], "status": "read"}),  # not hers
        (bob, {"message_id": "msg_missing", "status": "read"}),
        (bob, {"message_id": original["id"], "status": "read", "to": "carol"}),
    ):
        name = {id(alice): "alice", id(bob): "bob", id(carol): "carol"}[id(who)]
        r = receipt(who, name, body)
        assert (r.status_code, error_code(r)) == (404, "MESSAGE_NOT_FOUND")
    assert Delivery.objects.count() == 1


def test_a_receipt_with_an_id_is_idempotent(alice, bob):
    original = send(alice, "alice", "bob")
    body = {"message_id": original["id"], "status": "read", "id": "rcpt-1"}
    first, again = receipt(bob, "bob", body), receipt(bob, "bob", body)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() == again.json()
    r = receipt(bob, "bob", {**body, "status": "rejected"})
    assert error_code(r) == "ID_CONFLICT"


def test_receipts_name_the_sender_when_two_used_the_id(alice, bob, carol):
    send(alice, "alice", "bob", id="same")
    send(carol, "carol", "bob", id="same")
    r = receipt(bob, "bob", {"message_id": "same", "status": "read"})
    assert (error_code(r), r.json()["error"]["detail"]["senders"]) == (
        "INVALID_VALUE",
        ["alice", "carol"],
    )
    sent = receipt(bob, "bob", {"message_id": "same", "status": "read", "to": "carol"}).json()
    assert sent["to"] == "carol"


def test_receipt_refusals(bob):
    for body, code in (
        ({"status": "read"}, "MISSING_FIELD"),
        ({"message_id": "m", "status": "read", "text": "x"}, "UNKNOWN_FIELD"),
        ({"message_id": "m", "status": "read", "detail": "a\u0000"}, "INVALID_TEXT"),
        ({"message_id": "m", "status": "read", "detail": "d" * 4097}, "INVALID_VALUE"),
        ({"message_id": "..", "status": "read"}, "INVALID_VALUE"),
    ):
        assert error_code(receipt(bob, "bob", body)) == code


# --- contacts --------------------------------------------------------------------------------


def put(client, agent, cid, card):
    return client.put(f"/v1/agents/{agent}/contacts/{cid}", card, format="json")


def test_put_saves_a_card_201_then_replaces_it_200(alice):
    r = put(alice, "alice", "carol", CARD)
    assert (r.status_code, r.json()) == (201, CARD)
    assert alice.get("/v1/agents/alice/contacts/carol").json() == CARD
    changed = {**CARD, "display_name": "Carol C."}
    r = put(alice, "alice", "carol", changed)
    assert (r.status_code, r.json()) == (200, changed)
    assert put(alice, "alice", "carol", changed).status_code == 200  # unchanged: no event
    assert ContactEvent.objects.count() == 2


def test_a_card_is_completed_with_nulls(alice):
    assert put(alice, "alice", "dave", {"id": "dave"}).json() == {
        "id": "dave",
        "display_name": None,
        "endpoint": None,
        "capabilities": [],
        "public_key": None,
        "labels": {},
    }


@pytest.mark.parametrize(
    ("card", "code"),
    [
        ({**CARD, "id": "dave"}, "INVALID_VALUE"),
        ({k: v for k, v in CARD.items() if k != "id"}, "MISSING_FIELD"),
        ({**CARD, "email": "c@example.net"}, "UNKNOWN_FIELD"),
        ({**CARD, "endpoint": "javascript:alert(1)"}, "INVALID_VALUE"),
        ({**CARD, "endpoint": "https:// x"}, "INVALID_VALUE"),
        ({**CARD, "display_name": "Car\u202eol"}, "INVISIBLE_CHARACTER"),
        ({**CARD, "display_name": "two\nlines"}, "INVALID_VALUE"),
        ({**CARD, "capabilities": "research"}, "INVALID_TYPE"),
        ({**CARD, "capabilities": ["x"] * 65}, "INVALID_VALUE"),
        ({**CARD, "labels": {"team": 1}}, "INVALID_TYPE"),
        ({**CARD, "labels": {f"k{i}": "v" for i in range(65)}}, "INVALID_VALUE"),
        ({**CARD, "labels": {"k": "v" * 4097}}, "INVALID_VALUE"),
    ],
)
def test_a_bad_card_is_refused_and_nothing_saved(alice, card, code):
    r = put(alice, "alice", "carol", card)
    assert error_code(r) == code
    assert ContactEvent.objects.count() == 0


def test_contact_ids_in_the_path_follow_the_agent_id_rule(alice):
    assert error_code(put(alice, "alice", "Carol", {**CARD, "id": "Carol"})) == "INVALID_NAME"
    r = alice.get("/v1/agents/alice/contacts/nobody")
    assert (r.status_code, error_code(r)) == (404, "CONTACT_NOT_FOUND")


def test_another_agents_address_book_is_forbidden(alice, bob):
    put(alice, "alice", "carol", CARD)
    for r in (
        bob.get("/v1/agents/alice/contacts"),
        bob.get("/v1/agents/alice/contacts/carol"),
        bob.get("/v1/agents/alice/address-book"),
        put(bob, "alice", "carol", CARD),
        post(bob, "/v1/agents/alice/contact-shares", {"to": "bob", "contact_id": "carol"}),
    ):
        assert (r.status_code, error_code(r)) == (403, "FORBIDDEN")
        assert b"Carol" not in r.content


def test_the_contact_list_pages_by_id(alice):
    for name in ("dave", "carol", "erin"):
        put(alice, "alice", name, {"id": name})
    page = alice.get("/v1/agents/alice/contacts?limit=2").json()
    assert ([c["id"] for c in page["contacts"]], page["more"], page["next"]) == (
        ["carol", "dave"],
        True,
        "dave",
    )
    page = alice.get("/v1/agents/alice/contacts?after=dave").json()
    assert ([c["id"] for c in page["contacts"]], page["more"]) == (["erin"], False)


# --- contact shares --------------------------------------------------------------------------


def share(client, agent, body):
    return post(client, f"/v1/agents/{agent}/contact-shares", body)


def test_a_share_delivers_the_whole_card_and_acceptance_adds_it(alice, bob):
    put(alice, "alice", "carol", CARD)
    r = share(alice, "alice", {"to": "bob", "contact_id": "carol", "conversation_id": "task-42"})
    assert r.status_code == 201
    envelope = r.json()
    assert (envelope["kind"], envelope["to"], envelope["conversation_id"]) == (
        "contact.share",
        "bob",
        "task-42",
    )
    assert envelope["message"]["data"] == {"contact": CARD}
    received = deliveries(bob, "bob")
    assert [d["envelope"] for d in received] == [envelope]
    r = post(bob, f"/v1/agents/bob/contact-shares/{envelope['id']}/accept")
    assert r.status_code == 201
    event = r.json()
    assert event["type"] == "contact.upsert"
    assert (event["seq_num"], event["contact"]) == (0, CARD)
    assert event["source"] == {"kind": "share", "from": "alice", "message_id": envelope["id"]}
    assert bob.get("/v1/agents/bob/contacts/carol").json() == CARD
    assert deliveries(bob, "bob") == received  # the received envelope is never changed
    # accepting again answers the first acceptance
    r = post(bob, f"/v1/agents/bob/contact-shares/{envelope['id']}/accept", {})
    assert (r.status_code, r.json()) == (200, event)
    assert ContactEvent.objects.filter(owner__name="bob").count() == 1


def test_the_share_carries_the_card_as_it_was(alice, bob):
    put(alice, "alice", "carol", CARD)
    envelope = share(alice, "alice", {"to": "bob", "contact_id": "carol"}).json()
    put(alice, "alice", "carol", {**CARD, "display_name": "renamed"})
    post(bob, f"/v1/agents/bob/contact-shares/{envelope['id']}/accept")
    assert bob.get("/v1/agents/bob/contacts/carol").json() == CARD


def test_only_the_recipient_accepts_a_share(alice, bob, carol):
    put(alice, "alice", "carol", CARD)
    envelope = share(alice, "alice", {"to": "bob", "contact_id": "carol"}).json()
    message = send(alice, "alice", "bob", text="not a share")
    for who, name, msg_id in (
        (alice, "alice", envelope["id"]),  # its sender
        (carol, "carol", envelope["id"]),  # a stranger
        (bob, "bob", message["id"]),  # a message, not a share
        (bob, "bob", "msg_nothing"),
    ):
        r = post(who, f"/v1/agents/{name}/contact-shares/{msg_id}/accept")
        assert (r.status_code, error_code(r)) == (404, "MESSAGE_NOT_FOUND")
    r = post(carol, f"/v1/agents/bob/contact-shares/{envelope['id']}/accept")
    assert error_code(r) == "FORBIDDEN"
    assert ContactEvent.objects.filter(source="share").count() == 0
    r = post(bob, f"/v1/agents/bob/contact-shares/{envelope['id']}/accept", {"x": 1})
    assert error_code(r) == "UNKNOWN_FIELD"


def test_share_refusals(alice, bob):
    r = share(alice, "alice", {"to": "bob", "contact_id": "carol"})
    assert (r.status_code, error_code(r)) == (404, "CONTACT_NOT_FOUND")
    put(alice, "alice", "carol", CARD)
    r = share(alice, "alice", {"to": "zed", "contact_id": "carol"})
    assert (r.status_code, error_code(r)) == (404, "AGENT_NOT_FOUND")
    r = share(alice, "alice", {"to": "bob", "contact_id": "carol", "id": "mine"})
    assert error_code(r) == "UNKNOWN_FIELD"
    assert Delivery.objects.count() == 0


def test_the_address_book_replays_its_upserts(alice, bob):
    put(bob, "bob", "dave", {"id": "dave"})
    put(alice, "alice", "carol", CARD)
    envelope = share(alice, "alice", {"to": "bob", "contact_id": "carol"}).json()
    post(bob, f"/v1/agents/bob/contact-shares/{envelope['id']}/accept")
    put(bob, "bob", "dave", {"id": "dave", "display_name": "Dave"})
    book = bob.get("/v1/agents/bob/address-book").json()
    assert (book["next_cursor"], book["tail"]) == (3, 3)
    assert [(e["seq_num"], e["contact"]["id"], e["source"]["kind"]) for e in book["events"]] == [
        (0, "dave", "put"),
        (1, "carol", "share"),
        (2, "dave", "put"),
    ]
    page = bob.get("/v1/agents/bob/address-book?cursor=2&limit=1").json()
    assert [e["seq_num"] for e in page["events"]] == [2]
    assert error_code(bob.get("/v1/agents/bob/address-book?cursor=4")) == "INVALID_CURSOR"
    assert alice.get("/v1/agents/alice/address-book").json()["tail"] == 1


def test_an_oversized_string_anywhere_is_field_too_large(alice, bob):
    big = "x" * (512 * 1024 + 1)
    original = send(alice, "alice", "bob")
    r = receipt(bob, "bob", {"message_id": original["id"], "status": "read", "detail": big})
    assert (r.status_code, error_code(r)) == (413, "FIELD_TOO_LARGE")
    assert error_code(put(alice, "alice", "carol", {"id": "carol", "public_key": big})) == (
        "FIELD_TOO_LARGE"
    )
    r = share(alice, "alice", {"to": "bob", "contact_id": "carol", "conversation_id": big})
    assert error_code(r) == "FIELD_TOO_LARGE"
