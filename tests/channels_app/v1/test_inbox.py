"""GET /v1/agents/<id>/inbox: replay by cursor (the next seq_num to read), tail, limits,
Last-Event-ID, the byte budget, and only the owner reads it."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.errors import error_code


def send(client, to, text, agent="alice", **fields):
    r = client.post(
        f"/v1/agents/{agent}/messages", {"to": to, "text": text, **fields}, format="json"
    )
    assert r.status_code == 201, r.content
    return r.json()


def inbox(client, agent="bob", query="", **headers):
    return client.get(f"/v1/agents/{agent}/inbox{query}", **headers)


def seqs(page):
    return [d["seq_num"] for d in page["deliveries"]]


def test_an_empty_inbox_is_the_documents_page(bob):
    assert inbox(bob, query="?cursor=0&limit=100").json() == {
        "deliveries": [],
        "next_cursor": 0,
        "tail": 0,
    }


def test_seq_nums_start_at_0_and_next_cursor_is_the_next_record(alice, bob):
    sent = [send(alice, "bob", f"m{i}") for i in range(3)]
    page = inbox(bob).json()
    assert seqs(page) == [0, 1, 2]
    assert [d["envelope"] for d in page["deliveries"]] == sent
    assert (page["next_cursor"], page["tail"]) == (3, 3)
    page = inbox(bob, query="?cursor=1&limit=1").json()
    assert (seqs(page), page["next_cursor"], page["tail"]) == ([1], 2, 3)
    # a delivery's timestamp, RFC 3339 with Z
    assert page["deliveries"][0]["timestamp"].endswith("Z")
    # at the tail: an empty page keeps the cursor
    assert inbox(bob, query="?cursor=3").json() == {"deliveries": [], "next_cursor": 3, "tail": 3}


def test_each_inbox_numbers_its_own_deliveries(alice, bob, carol):
    send(alice, "bob", "to bob")
    send(alice, "carol", "to carol")
    send(bob, "carol", "bob to carol", agent="bob")
    assert seqs(inbox(carol, "carol").json()) == [0, 1]
    assert seqs(inbox(bob).json()) == [0]
    assert inbox(alice, "alice").json()["tail"] == 0  # sending delivers nothing to oneself


def test_a_cursor_beyond_the_tail_is_invalid(alice, bob):
    send(alice, "bob", "one")
    r = inbox(bob, query="?cursor=2")
    assert (r.status_code, error_code(r)) == (400, "INVALID_CURSOR")
    assert r.json()["error"]["detail"] == {"cursor": 2, "tail": 1}


@pytest.mark.parametrize("bad", ["-1", "1.5", "x", " 1", "\u00b2", "1" * 19])
def test_a_malformed_cursor_is_invalid(bob, bad):
    r = bob.get("/v1/agents/bob/inbox", {"cursor": bad})
    assert (r.status_code, error_code(r)) == (400, "INVALID_CURSOR")


@pytest.mark.parametrize("bad", ["0", "1001", "-5", "ten"])
def test_limit_is_1_to_1000(bob, bad):
    r = bob.get("/v1/agents/bob/inbox", {"limit": bad})
    assert (r.status_code, error_code(r)) == (400, "INVALID_VALUE")


def test_limit_defaults_to_100_and_takes_1000(alice, bob):
    for i in range(101):
        send(alice, "bob", f"m{i}")
    page = inbox(bob).json()
    assert (len(page["deliveries"]), page["next_cursor"], page["tail"]) == (100, 100, 101)
    assert len(inbox(bob, query="?limit=1000").json()["deliveries"]) == 101


def test_last_event_id_is_the_cursor_when_the_query_names_none(alice, bob):
    for i in range(3):
        send(alice, "bob", f"m{i}")
    assert seqs(inbox(bob, HTTP_LAST_EVENT_ID="2").json()) == [2]
    # the query's cursor wins
    assert seqs(inbox(bob, query="?cursor=1", HTTP_LAST_EVENT_ID="2").json()) == [1, 2]
    r = inbox(bob, HTTP_LAST_EVENT_ID="abc")
    assert (error_code(r), r.json()["error"]["detail"]["field"]) == (
        "INVALID_CURSOR",
        "Last-Event-ID",
    )
    assert error_code(inbox(bob, HTTP_LAST_EVENT_ID="9")) == "INVALID_CURSOR"
    # empty ones count as none, as every empty query parameter does
    assert seqs(inbox(bob, HTTP_LAST_EVENT_ID="").json()) == [0, 1, 2]
    assert seqs(inbox(bob, query="?cursor=", HTTP_LAST_EVENT_ID="2").json()) == [2]


def test_unknown_query_parameters_are_refused(bob):
    r = inbox(bob, query="?cursr=1")
    assert (r.status_code, error_code(r)) == (400, "UNKNOWN_FIELD")
    # follow is true (the live follow: test_sse.py) or false (this replay), nothing else
    r = inbox(bob, query="?follow=maybe")
    assert (r.status_code, error_code(r)) == (400, "INVALID_VALUE")
    assert inbox(bob, query="?follow=false").json()["tail"] == 0


def test_only_the_owner_reads_an_inbox(alice, bob, carol):
    send(alice, "bob", "for bob only")
    for reader, path in ((alice, "bob"), (carol, "bob"), (bob, "alice")):
        r = inbox(reader, path)
        assert (r.status_code, error_code(r)) == (403, "FORBIDDEN")
        assert b"for bob only" not in r.content


def test_a_page_stops_at_the_byte_budget_and_resumes(alice, bob, settings):
    for i in range(6):
        send(alice, "bob", f"{i}" * 3000)
    settings.AGENTCHAT_READ_MAX_BYTES = 8000
    seen = []
    cursor = 0
    while True:
        page = inbox(bob, query=f"?cursor={cursor}").json()
        if not page["deliveries"]:
            break
        assert 1 <= len(page["deliveries"]) <= 2
        seen += seqs(page)
        cursor = page["next_cursor"]
    assert seen == list(range(6))
    # one delivery over the budget still comes, alone
    settings.AGENTCHAT_READ_MAX_BYTES = 10
    assert seqs(inbox(bob).json()) == [0]


def test_a_page_reads_in_a_bounded_number_of_queries(alice, bob):
    for i in range(30):
        send(alice, "bob", f"m{i}")
    inbox(bob)  # the token's first use records it (once a minute)
    with CaptureQueriesContext(connection) as queries:
        assert len(inbox(bob).json()["deliveries"]) == 30
    # the token, the tail, the plan, the page (and the work budget's own statements)
    counted = [q for q in queries.captured_queries if "statement_timeout" not in q["sql"]]
    assert len(counted) <= 4, [q["sql"] for q in counted]


def test_a_delivery_reads_the_same_as_it_was_sent_whoever_sends_it(alice, bob, api_for):
    api_for("all")  # an agent may be named like a broadcast word
    sent = send(alice, "all", "to the agent named all")
    page = inbox(api_for("all"), "all").json()
    assert page["deliveries"][0]["envelope"] == sent
    assert sent["to"] == "all"
    own = send(alice, "alice", "a note to myself")
    assert inbox(alice, "alice").json()["deliveries"][0]["envelope"] == own
