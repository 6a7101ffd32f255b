"""Races have one winner, and the inbox is commit-ordered: real concurrent clients against a
real server (and, for the commit order, transactions held open in threads of this process).

On PostgreSQL these are the cases that matter (READ COMMITTED, row locks); on SQLite the
writer serializes transactions and they pass by construction. ``.ci/run`` runs both."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection, connections

from agentchat.core.models import Agent
from channels_app import inbox as inbox_reads
from channels_app import monitor as monitor_reads
from channels_app.envelopes import monitor_cursor_decode
from channels_app.models import Channel, ContactEvent, Delivery
from channels_app.services import envelope_send
from channels_app.services import envelopes as envelope_services
from tests.conftest import auth
from tests.signals import wait_until, waits_behind_us

pytestmark = pytest.mark.django_db(transaction=True)


def at_once(count, call):
    """``call(i)`` for i in range(count), from as many threads released together."""
    barrier = threading.Barrier(count)

    def run(i):
        barrier.wait(timeout=30)
        return call(i)

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(run, range(count)))


def post(live, token, path, body):
    with httpx.Client(base_url=live.url, headers=auth(token), timeout=60) as client:
        return client.post(path, json=body)


def test_concurrent_retries_of_one_id_make_one_envelope(live, make_agent):
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    body = {"to": "bob", "id": "handoff-7", "text": "once", "data": {"n": 1}}
    answers = at_once(8, lambda _: post(live, alice, "/v1/agents/alice/messages", body))
    assert sorted(r.status_code for r in answers) == [200] * 7 + [201]
    assert len({r.content for r in answers}) == 1
    assert Delivery.objects.count() == 1
    assert Channel.objects.get().last_seq == 1  # no gap left by the retries
    with httpx.Client(base_url=live.url, headers=auth(bob)) as client:
        page = client.get("/v1/agents/bob/inbox").json()
    assert (page["tail"], page["deliveries"][0]["envelope"]) == (1, answers[0].json())
    assert "Traceback" not in live.output()


def test_one_id_sent_at_once_to_two_agents_is_one_envelope_and_a_conflict(live, make_agent):
    _, alice = make_agent("alice")
    make_agent("bob")
    make_agent("carol")
    answers = at_once(
        2,
        lambda i: post(
            live, alice, "/v1/agents/alice/messages", {"to": ("bob", "carol")[i], "id": "x"}
        ),
    )
    assert sorted(r.status_code for r in answers) == [201, 409]
    assert [r.json()["error"]["code"] for r in answers if r.status_code == 409] == ["ID_CONFLICT"]
    assert Delivery.objects.count() == 1


def test_a_pairs_first_envelopes_at_once_make_one_channel(live, make_agent):
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob")}
    answers = at_once(
        6,
        lambda i: post(
            live,
            tokens[("alice", "bob")[i % 2]],
            f"/v1/agents/{('alice', 'bob')[i % 2]}/messages",
            {"to": ("bob", "alice")[i % 2], "text": f"m{i}"},
        ),
    )
    assert [r.status_code for r in answers] == [201] * 6
    channel = Channel.objects.get()
    assert (channel.direct_pair, channel.last_seq) == ("alice bob", 6)
    assert sorted(Delivery.objects.values_list("recipient__name", "seq")) == [
        ("alice", 0),
        ("alice", 1),
        ("alice", 2),
        ("bob", 0),
        ("bob", 1),
        ("bob", 2),
    ]


def test_a_follower_reads_every_delivery_once_in_order_while_senders_race(live, make_agent):
    senders = {f"s{i}": make_agent(f"s{i}")[1] for i in range(4)}
    _, bob = make_agent("bob")
    per_sender = 15
    total = per_sender * len(senders)
    done = threading.Event()
    pages: list[list[int]] = []

    def follow():
        seen: list[str] = []
        cursor = 0
        with httpx.Client(base_url=live.url, headers=auth(bob), timeout=60) as client:
            while len(seen) < total:
                page = client.get(f"/v1/agents/bob/inbox?cursor={cursor}&limit=7").json()
                numbers = [d["seq_num"] for d in page["deliveries"]]
                pages.append(numbers)
                assert numbers == list(range(cursor, cursor + len(numbers)))
                assert page["next_cursor"] <= page["tail"]
                seen += [d["envelope"]["id"] for d in page["deliveries"]]
                cursor = page["next_cursor"]
                if not numbers and done.is_set():
                    break
        return seen

    def send_all(name):
        with httpx.Client(base_url=live.url, headers=auth(senders[name]), timeout=60) as client:
            ids = []
            for n in range(per_sender):
                r = client.post(f"/v1/agents/{name}/messages", json={"to": "bob", "text": f"{n}"})
                assert r.status_code == 201
                ids.append(r.json()["id"])
            return ids

    with ThreadPoolExecutor(len(senders) + 1) as pool:
        reader = pool.submit(follow)
        sent = [i for ids in pool.map(send_all, senders) for i in ids]
        done.set()
        seen = reader.result(timeout=120)
    assert len(seen) == len(set(seen)) == total
    assert set(seen) == set(sent)
    assert sum(len(p) for p in pages) == total


def test_a_delivery_that_commits_late_is_never_passed_by_a_reader(make_agent, monkeypatch):
    # The first delivery to bob takes its seq_num and holds its transaction open; a second one
    # (another sender, another channel: only bob's inbox is shared) starts meanwhile. With an
    # autoincrement id the second would commit first under a higher number, a reader would read
    # it and move its cursor past the first, which commits later and is never read. Here the
    # second is numbered only once the first has committed, so the reader sees neither yet.
    alice, _ = make_agent("alice")
    carol, _ = make_agent("carol")
    bob, _ = make_agent("bob")
    first_holds, release, second_started = (threading.Event() for _ in range(3))
    real_take = envelope_services.inbox_seq_take

    def take(agent_id, now):
        taken = real_take(agent_id, now)
        if threading.current_thread().name == "first":
            first_holds.set()
            assert release.wait(timeout=30)
        return taken

    monkeypatch.setattr(envelope_services, "inbox_seq_take", take)

    def deliver(sender, text):
        threading.current_thread().name = text
        if text == "second":
            second_started.set()
        try:
            return envelope_send(sender=sender, to="bob", text=text).envelope()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(deliver, alice, "first")
        assert first_holds.wait(timeout=30)
        second = pool.submit(deliver, carol, "second")
        wait_until(
            lambda: second.done() or waits_behind_us(second_started),
            what="the second delivery finished or waits for the first",
        )
        # A follower reads now, and on from where that left it once both have committed.
        before = inbox_reads.inbox_page(agent=bob, cursor=0, limit=100)
        release.set()
        sent = [first.result(timeout=30), second.result(timeout=30)]
    after = inbox_reads.inbox_page(agent=bob, cursor=before.next_cursor, limit=100)
    read = [item.seq_num for item in before.items + after.items]
    assert read == [0, 1], "the follower passed a delivery that committed late"
    assert (before.items, before.tail) == ([], 0)  # the second was not numbered ahead of it
    assert [e["message"]["text"] for e in sent] == ["first", "second"]
    assert Delivery.objects.get(seq=0).message.body == "first"


def test_a_delivery_that_commits_late_is_never_passed_by_a_monitor_reader(make_agent, monkeypatch):
    # The monitor's twin of the test above, across inboxes: the first delivery (to bob) holds
    # its transaction open; a second one, to dave (another sender, another inbox: nothing they
    # share), commits meanwhile on PostgreSQL (on SQLite it waits for the writer). A monitor
    # reader reads it and moves its cursor past it; the first is numbered only once it has
    # committed, so after the second, and the reader's next read from its cursor has it.
    alice, _ = make_agent("alice")
    carol, _ = make_agent("carol")
    make_agent("bob")
    make_agent("dave")
    first_holds, release, second_started = (threading.Event() for _ in range(3))
    real_take = envelope_services.inbox_seq_take

    def take(agent_id, now):
        taken = real_take(agent_id, now)
        if threading.current_thread().name == "first":
            first_holds.set()
            assert release.wait(timeout=30)
        return taken

    monkeypatch.setattr(envelope_services, "inbox_seq_take", take)

    def deliver(sender, to, text):
        threading.current_thread().name = text
        if text == "second":
            second_started.set()
        try:
            return envelope_send(sender=sender, to=to, text=text).envelope()
        finally:
            connections.close_all()

    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(deliver, alice, "bob", "first")
        assert first_holds.wait(timeout=30)
        second = pool.submit(deliver, carol, "dave", "second")
        wait_until(
            lambda: second.done() or waits_behind_us(second_started),
            what="the second delivery finished or waits for the first",
        )
        before = monitor_reads.monitor_page(cursor=None, limit=100)
        release.set()
        first.result(timeout=30)
        second.result(timeout=30)
    cursor = monitor_cursor_decode(before.next_cursor)
    after = monitor_reads.monitor_page(cursor=cursor, limit=100)
    read = [item.inbox for item in before.items + after.items]
    assert sorted(read) == ["bob", "dave"], "the monitor reader passed a delivery"
    if connection.vendor == "postgresql":
        assert [item.inbox for item in before.items] == ["dave"]  # it did commit first
    assert (
        monitor_reads.monitor_page(cursor=monitor_cursor_decode(after.next_cursor), limit=9).items
        == []
    )


def test_concurrent_puts_of_a_new_contact_are_one_create(live, make_agent):
    _, alice = make_agent("alice")
    answers = at_once(
        4,
        lambda i: httpx.put(
            f"{live.url}/v1/agents/alice/contacts/carol",
            json={"id": "carol", "display_name": f"Carol {i}"},
            headers=auth(alice),
            timeout=60,
        ),
    )
    assert sorted(r.status_code for r in answers) == [200, 200, 200, 201]
    assert ContactEvent.objects.count() == 4
    assert list(ContactEvent.objects.order_by("seq").values_list("seq", flat=True)) == [0, 1, 2, 3]


def test_concurrent_acceptances_of_one_share_are_one_event(live, make_agent):
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    httpx.put(
        f"{live.url}/v1/agents/alice/contacts/carol", json={"id": "carol"}, headers=auth(alice)
    )
    share = post(
        live, alice, "/v1/agents/alice/contact-shares", {"to": "bob", "contact_id": "carol"}
    )
    path = f"/v1/agents/bob/contact-shares/{share.json()['id']}/accept"
    answers = at_once(4, lambda _: post(live, bob, path, {}))
    assert sorted(r.status_code for r in answers) == [200, 200, 200, 201]
    assert len({r.content for r in answers}) == 1
    assert ContactEvent.objects.filter(owner=Agent.objects.get(name="bob")).count() == 1
