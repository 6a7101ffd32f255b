"""The task list is paged (60 tasks of 1,000 acceptance lines of 700 bytes answered
40 MB): ``limit`` and ``after`` (a task id), with the ``status``/``owner`` filters; at most
``limit`` tasks and about AGENTCHAT_READ_MAX_BYTES a page; a page loads only the tasks it
sends."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.rules.parsed import Parsed
from channels_app.services import channel_create
from tasks_app import selectors
from tasks_app.services import lease_claim, task_create, task_update
from tests.pages import count_loaded, json_size, page_get, walk
from tests.tasks_app.helpers import CHANNEL, FIVE_MINUTES, tasks_url

BIG_ACCEPTANCE = [f"{i:04d} " + "a" * 695 for i in range(1000)]  # 700 KB of lines


@pytest.fixture
def board(db, make_agent):
    """30 tasks: open, blocked, in progress (bob's lease), done; owners bob, carol or none."""
    make_agent("alice")
    make_agent("bob")
    channel = channel_create(name=CHANNEL, created_by="alice")
    for i in range(30):
        owner = ("bob", "carol", None)[i % 3]
        task_id = f"t{i:02d}"
        task_create(
            channel=channel,
            task_id=task_id,
            title=f"task {i}",
            created_by="alice",
            owner=owner,
            depends_on=["t00"] if i and i % 4 == 0 else [],
        )
        if i % 5 == 1:
            task_update(
                channel=channel,
                task_id=task_id,
                actor="alice",
                changes={"status": Parsed.ok("blocked")},
            )
        elif i % 5 == 2 and owner in ("bob", None) and i % 4:
            lease_claim(channel=channel, task_id=task_id, actor="bob", duration=FIVE_MINUTES)
    return channel


@pytest.mark.django_db
@pytest.mark.parametrize(
    "filters", [{}, {"status": "open"}, {"owner": "bob"}, {"status": "in_progress", "owner": "bob"}]
)
@pytest.mark.parametrize("limit", [1, 3, 1000])
def test_paging_gives_every_task_once_in_order_with_filters(board, api_for, filters, limit):
    alice = api_for("alice")
    everything = page_get(alice, tasks_url(), "tasks", **filters)["tasks"]
    expected = [
        t["id"] for t in selectors.tasks_to_dicts(selectors.task_list(channel=board, **filters))
    ]
    assert [t["id"] for t in everything] == expected
    assert expected  # each filter matches some tasks
    assert all(all(t[k] == v for k, v in filters.items()) for t in everything)
    walked = walk(alice, tasks_url(), "tasks", "id", limit=limit, **filters)
    assert [task_id for page in walked for task_id in page] == expected
    assert all(len(page) == limit for page in walked[:-1])


@pytest.mark.django_db
def test_a_page_of_big_tasks_is_bounded_and_loads_only_what_it_sends(
    db, make_agent, api_for, settings, monkeypatch
):
    make_agent("alice")
    channel = channel_create(name=CHANNEL, created_by="alice")
    for i in range(12):
        big = i % 3 != 2  # two big ones, then a small one
        task_create(
            channel=channel,
            task_id=f"b{i:02d}",
            title=f"b{i}",
            created_by="alice",
            acceptance=BIG_ACCEPTANCE if big else ["small"],
        )
    loaded = count_loaded(monkeypatch, selectors)
    budget = settings.AGENTCHAT_READ_MAX_BYTES
    alice = api_for("alice")
    walked, after, lengths = [], None, []
    while True:
        body = page_get(alice, tasks_url(), "tasks", **({"after": after} if after else {}))
        page = body["tasks"]
        size = sum(json_size(t) + 1 for t in page) - 1
        assert size <= budget, [t["id"] for t in page]  # 700 KB tasks: one at a time (+ small)
        walked += [t["id"] for t in page]
        lengths.append(len(page))
        if not body["more"]:
            break
        after = body["next"]
    assert walked == [f"b{i:02d}" for i in range(12)]
    assert lengths == [1, 2, 1, 2, 1, 2, 1, 2]  # a big one, or a big one and a small one
    assert loaded == lengths  # not the 8 big tasks (6 MB) of the list for every page


@pytest.mark.django_db
def test_one_task_bigger_than_the_budget_is_a_page_of_its_own(db, make_agent, api_for, settings):
    make_agent("alice")
    channel = channel_create(name=CHANNEL, created_by="alice")
    for task_id in ["a", "b", "c"]:
        task_create(
            channel=channel,
            task_id=task_id,
            title=task_id,
            created_by="alice",
            acceptance=BIG_ACCEPTANCE[:10] if task_id == "b" else [],
        )
    settings.AGENTCHAT_READ_MAX_BYTES = 2000
    assert walk(api_for("alice"), tasks_url(), "tasks", "id") == [["a"], ["b"], ["c"]]


@pytest.mark.django_db
def test_queries_per_page_do_not_grow_with_the_list(db, make_agent, api_for):
    make_agent("alice")
    channel = channel_create(name=CHANNEL, created_by="alice")
    alice = api_for("alice")
    alice.get(tasks_url())  # the token's first use writes its own rows

    def queries(prefix: str, count: int) -> int:
        for i in range(count):
            task_create(
                channel=channel,
                task_id=f"{prefix}{i:04d}",
                title="t",
                created_by="alice",
                depends_on=[f"{prefix}0000"] if i else [],
            )
        with CaptureQueriesContext(connection) as captured:
            body = page_get(alice, tasks_url(), "tasks", limit=5, after=prefix)
        assert len(body["tasks"]) == 5 and body["more"]
        return len(captured)

    assert queries("a", 8) == queries("b", 300)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": "0"}, "INVALID_VALUE"),
        ({"limit": "1001"}, "INVALID_VALUE"),
        ({"limit": "1e3"}, "INVALID_VALUE"),
        ({"limit": "\u00b2"}, "INVALID_VALUE"),
        ({"limit": "9" * 5000}, "INVALID_VALUE"),
        ({"after": "a\x00"}, "TASK_INVALID_ID"),
        ({"after": "x" * 129}, "TASK_INVALID_ID"),
        ({"after": "t1\n"}, "TASK_INVALID_ID"),
        ({"after": "../t"}, "TASK_INVALID_ID"),
        ({"after": " "}, "TASK_INVALID_ID"),
        ({"after": "t01", "status": "bogus"}, "TASK_INVALID_STATUS"),
        ({"after": "t01", "owner": "Bob"}, "TASK_INVALID_OWNER"),
    ],
)
def test_hostile_limit_and_after_get_a_clean_400(board, api_for, params, code):
    r = api_for("alice").get(f"{tasks_url()}?{httpx.QueryParams(params)}")
    assert (r.status_code, r.json()["error"]["code"]) == (400, code), r.content


@pytest.mark.django_db
def test_the_task_list_of_a_hidden_channel_is_not_found(db, make_agent, api_for):
    make_agent("alice")
    channel_create(name="secret", created_by="alice", visibility="members")
    r = api_for("bob").get(f"{tasks_url(channel='secret')}?limit=1&after=a")
    assert (r.status_code, r.json()["error"]["code"]) == (404, "CHANNEL_NOT_FOUND")
