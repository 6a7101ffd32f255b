"""The channel list is paged (so that no client can hurt another): ``limit`` and ``after``,
at most ``limit`` channels and about AGENTCHAT_READ_MAX_BYTES of JSON per page, ``more`` and
``next``; members-only channels stay hidden; a page loads only its rows, and its unread counts
are one query whatever the list's size."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from channels_app import selectors
from channels_app.services import channel_create, message_post
from tests.pages import count_loaded, json_size, page_get, walk

URL = "/api/v1/channels/"


@pytest.fixture
def many(db, make_agent):
    """25 channels bob sees (open ones and members-only ones with him) and 10 he does not."""
    make_agent("alice")
    make_agent("bob")
    seen = []
    for i in range(35):
        name = f"c{i:02d}"
        if i % 7 == 3:  # members-only without bob
            channel_create(name=name, created_by="alice", visibility="members")
            continue
        if i % 7 == 5:  # members-only with bob
            channel_create(name=name, created_by="alice", visibility="members", members=["bob"])
        else:
            channel_create(name=name, created_by="alice")
        seen.append(name)
    # Mixed case orders by the database's collation; the list and the keys agree on it.
    channel_create(name="Zeta", created_by="alice")
    return seen


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [1, 4, 7, 1000])
def test_paging_gives_every_visible_channel_once_in_order(many, bob, limit):
    everything = [c["name"] for c in page_get(bob, URL, "channels")["channels"]]
    assert sorted(everything) == sorted([*many, "Zeta"])  # no members-only channel of others
    assert everything == [c.name for c in selectors.channels_visible_to("bob")]
    walked = walk(bob, URL, "channels", "name", limit=limit)
    assert [name for page in walked for name in page] == everything
    assert all(len(page) == limit for page in walked[:-1])
    assert 1 <= len(walked[-1]) <= limit


@pytest.mark.django_db
def test_a_small_list_is_one_page_without_next(many, bob):
    body = page_get(bob, URL, "channels")
    assert body["more"] is False and "next" not in body
    first = body["channels"][0]
    assert {"name", "cursor", "unread", "visibility", "last_seq"} <= set(first)


@pytest.mark.django_db
def test_after_a_name_that_is_no_channel_starts_after_it(many, bob):
    body = page_get(bob, URL, "channels", after="c10x", limit=2)
    assert [c["name"] for c in body["channels"]] == ["c11", "c12"]
    assert (body["more"], body["next"]) == (True, "c12")
    # after a members-only channel bob cannot see: the same page as after any other name
    assert page_get(bob, URL, "channels", after="c03", limit=1)["channels"][0]["name"] == "c04"
    assert page_get(bob, URL, "channels", after="zzz") == {"channels": [], "more": False}


@pytest.mark.django_db
def test_unread_counts_are_per_page_and_right(many, bob):
    channel = selectors.channel_get("c04", viewer="bob")
    for i in range(3):
        message_post(channel=channel, sender="alice", title=f"m{i}")
    message_post(channel=channel, sender="alice", title="not for bob", to="carol")
    body = page_get(bob, URL, "channels", after="c02", limit=2)
    assert [(c["name"], c["unread"]) for c in body["channels"]] == [("c04", 3), ("c05", 0)]


@pytest.mark.django_db
def test_the_byte_budget_bounds_a_page_of_big_channels(db, make_agent, bob, settings, monkeypatch):
    make_agent("alice")
    members = [f"agent-{i:04d}-with-a-rather-long-name-for-its-roster" for i in range(300)]
    for i in range(40):
        channel_create(name=f"big{i:02d}", created_by="alice", topic="t" * 4000, members=members)
    settings.AGENTCHAT_READ_MAX_BYTES = budget = 100_000  # about 5 channels of ~19 KB
    loaded = count_loaded(monkeypatch, selectors)
    walked, after, sizes, lengths = [], None, [], []
    while True:
        body = page_get(bob, URL, "channels", **({"after": after} if after else {}))
        page = body["channels"]
        walked += [c["name"] for c in page]
        lengths.append(len(page))
        sizes.append(sum(json_size(c) + 1 for c in page) - 1)
        assert len(page) == 1 or sizes[-1] <= budget
        if not body["more"]:
            break
        after = body["next"]
    assert walked == [f"big{i:02d}" for i in range(40)]
    assert all(size > budget * 0.75 for size in sizes[:-1])  # full pages, not crumbs
    assert loaded == lengths  # each page loads the rows it sends, no more


@pytest.mark.django_db
def test_one_channel_bigger_than_the_budget_is_a_page_of_its_own(db, make_agent, bob, settings):
    make_agent("alice")
    channel_create(name="a", created_by="alice")
    channel_create(name="b", created_by="alice", topic="t" * 4000)
    channel_create(name="c", created_by="alice")
    settings.AGENTCHAT_READ_MAX_BYTES = 1000
    assert walk(bob, URL, "channels", "name") == [["a"], ["b"], ["c"]]


@pytest.mark.django_db
def test_queries_per_page_do_not_grow_with_the_list(db, make_agent, bob):
    make_agent("alice")

    def queries(count: int, limit: int) -> int:
        for i in range(count):
            channel_create(name=f"q{count}-{i:04d}", created_by="alice")
        page_get(bob, URL, "channels", limit=1)  # the token's first use writes its own rows
        with CaptureQueriesContext(connection) as captured:
            page_get(bob, URL, "channels", limit=limit, after=f"q{count}-")
        return len(captured)

    small, big = queries(12, 10), queries(400, 10)
    assert small == big
    # A full page of 1000: the plan doubles from PLAN_FIRST rows, then one load with the
    # unread counts (authentication and the lane add their own few).
    with CaptureQueriesContext(connection) as captured:
        body = page_get(bob, URL, "channels")
    assert len(body["channels"]) == 412
    unread = [q for q in captured if "COUNT(" in q["sql"].upper()]
    assert len(unread) == 1
    assert len(captured) <= small + 6  # 8, 16, …, 256, 512 rows planned


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": "0"}, "INVALID_VALUE"),
        ({"limit": "1001"}, "INVALID_VALUE"),
        ({"limit": "-1"}, "INVALID_VALUE"),
        ({"limit": "1.5"}, "INVALID_VALUE"),
        ({"limit": "\u0663"}, "INVALID_VALUE"),
        ({"limit": "9" * 5000}, "INVALID_VALUE"),
        ({"limit": " 1"}, "INVALID_VALUE"),
        ({"after": "a\x00b"}, "INVALID_NAME"),
        ({"after": "-a"}, "INVALID_NAME"),
        ({"after": "a b"}, "INVALID_NAME"),
        ({"after": "x" * 65}, "INVALID_NAME"),
        ({"after": "c1\n"}, "INVALID_NAME"),
        ({"after": "é"}, "INVALID_NAME"),
        ({"after": "a'; DROP TABLE x;--"}, "INVALID_NAME"),
    ],
)
def test_hostile_limit_and_after_get_a_clean_400(many, bob, params, code):
    r = bob.get(f"{URL}?{httpx.QueryParams(params)}")
    assert (r.status_code, r.json()["error"]["code"]) == (400, code), r.content
