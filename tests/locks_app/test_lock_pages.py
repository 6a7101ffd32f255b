"""The lock list is paged like the other lists (expired locks are kept, so the list has
no bound of its own): ``limit`` and ``after`` (a lock id), at most ``limit`` locks and about
AGENTCHAT_READ_MAX_BYTES a page; a page loads only the locks it sends."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.rules.records import Duration
from channels_app.models import Channel
from channels_app.services import channel_create
from locks_app import selectors
from locks_app.services import lock_acquire
from tests.pages import count_loaded, json_size, page_get, walk

URL = "/api/v1/channels/review/locks/"


@pytest.fixture
def review(db, make_agent):
    make_agent("alice")
    return channel_create(name="review", created_by="alice")


def acquire(channel: Channel, paths: list[str], lease_seconds: float = 300) -> None:
    lock_acquire(
        channel=channel,
        owner="alice",
        paths=selectors.lock_paths_parse(paths),
        lease_seconds=Duration.parse(lease_seconds),
    )


def long_paths(prefix: str, count: int) -> list[str]:
    """``count`` paths of about 1 KB each under ``prefix``."""
    return [f"{prefix}/{j:02d}/" + "/".join(["s" * 240] * 4) for j in range(count)]


@pytest.mark.django_db
@pytest.mark.parametrize("limit", [1, 4, 1000])
def test_paging_gives_every_lock_once_in_order_expired_ones_too(review, api_for, clock, limit):
    for i in range(9):
        acquire(review, [f"short/{i}"], lease_seconds=1)
    clock.advance(5)  # expired, and kept
    for i in range(9):
        acquire(review, [f"long/{i}"], lease_seconds=600)
    expected = [lock.lock_id for lock in selectors.lock_list(channel=review)]
    assert len(expected) == 18
    walked = walk(api_for("bob"), URL, "locks", "lock_id", limit=limit)
    assert [lock_id for page in walked for lock_id in page] == expected
    assert all(len(page) == limit for page in walked[:-1])


@pytest.mark.django_db
def test_a_page_of_big_locks_is_bounded_and_loads_only_what_it_sends(
    review, api_for, settings, monkeypatch
):
    settings.AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT = 640
    for i in range(10):
        acquire(review, long_paths(f"p{i}", 64))  # ~130 KB
    settings.AGENTCHAT_READ_MAX_BYTES = budget = 300_000
    loaded = count_loaded(monkeypatch, selectors)
    bob = api_for("bob")
    walked, after, lengths = [], None, []
    while True:
        body = page_get(bob, URL, "locks", **({"after": after} if after else {}))
        page = body["locks"]
        assert sum(json_size(lock) + 1 for lock in page) - 1 <= budget
        walked += [lock["lock_id"] for lock in page]
        lengths.append(len(page))
        if not body["more"]:
            break
        after = body["next"]
    assert walked == [lock.lock_id for lock in selectors.lock_list(channel=review)]
    assert lengths == [2, 2, 2, 2, 2]
    assert loaded == lengths


@pytest.mark.django_db
def test_queries_per_page_do_not_grow_with_the_list(review, api_for, settings):
    settings.AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT = 410
    bob = api_for("bob")
    bob.get(URL)  # the token's first use writes its own rows

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            body = page_get(bob, URL, "locks", limit=3)
        assert len(body["locks"]) == 3 and body["more"]
        return len(captured)

    for i in range(5):
        acquire(review, [f"a/{i}", f"b/{i}"])
    few = queries()
    for i in range(200):
        acquire(review, [f"c/{i}", f"d/{i}"])
    assert queries() == few


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("params", "code"),
    [
        ({"limit": "0"}, "INVALID_VALUE"),
        ({"limit": "1001"}, "INVALID_VALUE"),
        ({"limit": "+5"}, "INVALID_VALUE"),
        ({"limit": "9" * 5000}, "INVALID_VALUE"),
        ({"after": "a\x00"}, "PATH_LOCK_INVALID_LOCK_ID"),
        ({"after": "f" * 65}, "PATH_LOCK_INVALID_LOCK_ID"),
        ({"after": "ab\n"}, "PATH_LOCK_INVALID_LOCK_ID"),
        ({"after": "src/a"}, "PATH_LOCK_INVALID_LOCK_ID"),
        ({"after": "_a"}, "PATH_LOCK_INVALID_LOCK_ID"),
    ],
)
def test_hostile_limit_and_after_get_a_clean_400(review, api_for, params, code):
    r = api_for("bob").get(f"{URL}?{httpx.QueryParams(params)}")
    assert (r.status_code, r.json()["error"]["code"]) == (400, code), r.content
