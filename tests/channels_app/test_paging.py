"""Paged read and wait: at most ``limit`` messages and a byte budget per
response (at least one message); ``more: true`` while relevant messages remain, with the cursor
on the last one delivered; otherwise the cursor moves to the channel's last seq. Nothing is
skipped and nothing repeated across pages."""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import pytest

from agentchat.core.models import Agent
from channels_app import live
from channels_app.models import Cursor
from channels_app.records import message_json
from channels_app.selectors import cursor_get
from channels_app.services import channel_create, message_post, message_read
from tests.conftest import auth


def read(client, channel="pages", **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    r = client.post(f"/api/v1/channels/{channel}/read/?{query}")
    assert r.status_code == 200, r.content
    return r.json()


def titles(page):
    return [m["title"] for m in page["messages"]]


@pytest.fixture
def bob_api(api_for):
    return api_for("bob")


@pytest.fixture
def pages(db, make_agent):
    make_agent("alice")
    make_agent("carol")
    return channel_create(name="pages", created_by="alice")


def post_mixed(channel, count):
    """Relevant messages to bob (r0, r1, …) with irrelevant ones between them (to carol, and
    bob's own); returns the relevant titles."""
    relevant = []
    for i in range(count):
        message_post(channel=channel, sender="alice", title=f"r{i}", to="bob" if i % 2 else None)
        relevant.append(f"r{i}")
        message_post(channel=channel, sender="alice", title=f"x{i}", to="carol")
        message_post(channel=channel, sender="bob", title=f"own{i}")
    return relevant


@pytest.mark.django_db
def test_read_pages_by_limit_with_irrelevant_messages_between(pages, bob_api):
    relevant = post_mixed(pages, 7)
    seen, cursors = [], []
    while True:
        page = read(bob_api, limit=3)
        seen += titles(page)
        cursors.append(page["cursor"])
        if not page["more"]:
            break
        # The cursor stands on the last message delivered, not past the ones not yet sent.
        assert page["cursor"] == page["messages"][-1]["seq"]
    assert seen == relevant
    assert [len(c) for c in [seen[:3], seen[3:6], seen[6:]]] == [3, 3, 1]
    assert cursors[-1] == pages.__class__.objects.get(pk=pages.pk).last_seq == 21
    assert read(bob_api) == {"messages": [], "cursor": 21, "more": False}


@pytest.mark.django_db
def test_a_full_last_page_with_only_irrelevant_messages_after_it_is_not_more(pages, bob_api):
    message_post(channel=pages, sender="alice", title="a", to="bob")
    message_post(channel=pages, sender="alice", title="b")
    for i in range(3):
        message_post(channel=pages, sender="alice", title=f"x{i}", to="carol")
    page = read(bob_api, limit=2)
    assert (titles(page), page["more"], page["cursor"]) == (["a", "b"], False, 5)


@pytest.mark.django_db
def test_the_byte_budget_cuts_a_page_in_the_middle(pages, bob_api, settings):
    sizes = [100, 3000, 50, 2000, 2000, 10, 6000, 10]
    for i, size in enumerate(sizes):
        message_post(channel=pages, sender="alice", title=f"m{i}", body="y" * size, to="bob")
        message_post(channel=pages, sender="alice", title=f"x{i}", to="carol")
    settings.AGENTCHAT_READ_MAX_BYTES = budget = 4000
    pages_seen = []
    while True:
        page = read(bob_api)
        pages_seen.append([(m["title"], size_of(m)) for m in page["messages"]])
        if not page["more"]:
            break
    assert [t for p in pages_seen for t, _ in p] == [f"m{i}" for i in range(len(sizes))]
    for number, page in enumerate(pages_seen):
        total = sum(size for _, size in page) + len(page) - 1  # and the commas between
        # Within the budget, or one message bigger than the whole budget.
        assert total <= budget or len(page) == 1, page
        if number + 1 < len(pages_seen):  # and full: the next message would not have fit
            assert total + 1 + pages_seen[number + 1][0][1] > budget, page
    assert [len(p) for p in pages_seen] == [2, 2, 2, 1, 1]  # cut in the middle, 6000 alone
    assert Cursor.objects.get(agent__name="bob").seq == 16


def size_of(message: dict) -> int:
    return len(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode())


@pytest.mark.django_db
def test_random_pages_deliver_every_relevant_message_once(db, make_agent):
    make_agent("alice")
    bob, _ = make_agent("bob")
    rng = random.Random(8)
    for round_ in range(15):
        channel = channel_create(name=f"rand{round_}", created_by="alice")
        relevant = []
        for i in range(rng.randint(0, 40)):
            kind = rng.choice(["bob", "all", "carol", "own"])
            title = f"{kind}{i}"
            body = "z" * rng.choice([0, 10, 500, 3000])
            if kind == "own":
                message_post(channel=channel, sender="bob", title=title, body=body)
                continue
            to = None if kind == "all" else kind
            message_post(channel=channel, sender="alice", title=title, body=body, to=to)
            if kind != "carol":
                relevant.append(title)
        limit, budget = rng.randint(1, 6), rng.choice([1, 600, 4000, 10**6])
        seen, before = [], -1
        while True:
            page = message_read(channel=channel, agent=bob, limit=limit, max_bytes=budget)
            delivered = [json.loads(part)["title"] for part in page.parts]
            assert len(delivered) <= limit
            assert page.cursor >= before  # the cursor never goes back
            before = page.cursor
            seen += delivered
            if not page.more:
                break
        assert seen == relevant, (round_, limit, budget)
        assert page.cursor == channel.__class__.objects.get(pk=channel.pk).last_seq


@pytest.mark.django_db
@pytest.mark.parametrize(
    "raw", ["0", "1001", "-1", "1.5", "abc", "\u0663", "\u00b2", "9" * 5000, "1\n", " 1"]
)
def test_read_refuses_a_bad_limit_and_moves_nothing(pages, bob_api, raw):
    message_post(channel=pages, sender="alice", title="kept")
    r = bob_api.post("/api/v1/channels/pages/read/", {"limit": raw}, format="json")
    assert r.status_code == 400  # limit is a query parameter: in the body it is unknown
    r = bob_api.post(f"/api/v1/channels/pages/read/?{httpx.QueryParams(limit=raw)}")
    assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_VALUE")
    assert not Cursor.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_wait_pages_like_read(make_agent):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="pages", created_by="alice")
    for i in range(5):
        message_post(channel=channel, sender="alice", title=f"m{i}", to="bob")
        message_post(channel=channel, sender="alice", title=f"x{i}", to="carol")

    async def scenario():
        results = []
        for _ in range(3):
            result = await live.message_wait(channel=channel, agent=bob, timeout=5, limit=2)
            results.append(json.loads(result.body()))
        return results

    results = asyncio.run(scenario())
    assert [titles(r) for r in results] == [["m0", "m1"], ["m2", "m3"], ["m4"]]
    assert [(r["more"], r["cursor"]) for r in results] == [(True, 3), (True, 7), (False, 10)]
    assert cursor_get(agent=bob, channel=channel) == 10


def test_wait_limit_over_http(live, make_agent):
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    with httpx.Client(base_url=f"{live.url}/api/v1/channels/", timeout=30) as http:
        assert http.post("", json={"name": "pw"}, headers=auth(alice)).status_code == 201
        for i in range(3):
            r = http.post("pw/messages/", json={"title": f"m{i}"}, headers=auth(alice))
            assert r.status_code == 201
        r = http.get("pw/wait/", params={"timeout": 5, "limit": 2}, headers=auth(bob))
        assert (titles(r.json()), r.json()["more"], r.json()["cursor"]) == (["m0", "m1"], True, 2)
        for raw in ["0", "1001", "\u0663", "9" * 5000]:
            r = http.get("pw/wait/", params={"timeout": 0, "limit": raw}, headers=auth(bob))
            assert (r.status_code, r.json()["error"]["code"]) == (400, "INVALID_VALUE"), raw
        r = http.get("pw/wait/", params={"timeout": 5}, headers=auth(bob))
        assert (titles(r.json()), r.json()["more"], r.json()["cursor"]) == (["m2"], False, 3)
    assert Agent.objects.get(name="bob").cursors.get().seq == 3


def test_message_json_is_the_bytes_the_api_sends(db, make_agent):
    make_agent("alice")
    channel = channel_create(name="pages", created_by="alice")
    message, _ = message_post(
        channel=channel, sender="alice", title="é", body="a \u2028 b", data={"k": [1]}
    )
    from rest_framework.renderers import JSONRenderer

    from channels_app.records import message_to_dict

    assert message_json(message) == JSONRenderer().render(message_to_dict(message))


@pytest.mark.django_db
def test_a_page_loads_only_the_rows_it_can_send(db, make_agent, monkeypatch, settings):
    settings.AGENTCHAT_POST_RATE = ""  # 1260 posts at once: more than the default budget
    from channels_app import selectors

    make_agent("alice")
    bob, _ = make_agent("bob")
    big = channel_create(name="big", created_by="alice")
    for i in range(60):
        message_post(channel=big, sender="alice", title=f"b{i}", body="x" * 100_000)
    small = channel_create(name="small", created_by="alice")
    for i in range(1200):
        message_post(channel=small, sender="alice", title=f"s{i}")
    loaded = []
    real = selectors._attach

    def counting(rows, channel):
        result = real(rows, channel)
        loaded.append(len(result))
        return result

    monkeypatch.setattr(selectors, "_attach", counting)
    few = channel_create(name="few", created_by="alice")
    for i in range(10):
        message_post(channel=few, sender="alice", title=f"f{i}")
    page = message_read(channel=few, agent=bob)
    assert (len(page.parts), page.more, loaded) == (10, False, [10])  # the usual: one query
    loaded.clear()
    page = message_read(channel=big, agent=bob, max_bytes=1024 * 1024)
    assert (len(page.parts), page.more) == (10, True)  # 10 x ~100 KB in 1 MiB
    assert sum(loaded) <= selectors.PAGE_BATCH  # not the 60 rows (6 MB) of the backlog
    loaded.clear()
    page = message_read(channel=small, agent=bob)
    assert (len(page.parts), page.more, page.cursor) == (1000, True, 1000)
    assert sum(loaded) <= 1000 + selectors.PAGE_BATCH
    assert len(loaded) <= 8  # a few queries, not one per 16 rows
