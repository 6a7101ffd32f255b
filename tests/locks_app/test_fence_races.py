"""Two acquisitions at once never get one fence (a PostgreSQL case at heart: on SQLite the
FIFO writer runs one at a time and these pass by construction; .ci/run runs both)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connections

from agentchat.core.db.transactions import write_atomic
from channels_app.services import channel_create
from locks_app import selectors, services
from locks_app.models import LockFence, PathLock
from tasks_app import services as task_services
from tasks_app.models import Task
from tests.signals import wait_until, waits_behind_us
from tests.tasks_app.helpers import FIVE_MINUTES

pytestmark = pytest.mark.django_db(transaction=True)


def _in_thread(func):
    def run(*args):
        try:
            return func(*args)
        finally:
            connections.close_all()

    return run


def test_concurrent_lock_acquisitions_get_distinct_fences(make_agent):
    channel = channel_create(name="races", created_by="alice")
    barrier = threading.Barrier(4)

    @_in_thread
    def acquire(n: int) -> int:
        barrier.wait(10)
        lock = services.lock_acquire(
            channel=channel,
            owner="alice",
            paths=selectors.lock_paths_parse([f"src/{n}.py"]),
        )
        return lock.fence

    with ThreadPoolExecutor(4) as pool:
        fences = list(pool.map(acquire, range(4)))
    assert sorted(fences) == [1, 2, 3, 4]
    assert sorted(PathLock.objects.values_list("fence", flat=True)) == [1, 2, 3, 4]
    assert LockFence.objects.get(channel=channel).last_fence == 4


def test_the_counter_row_serializes_takers_even_without_the_channel_lock(make_agent):
    channel = channel_create(name="races", created_by="alice")
    first_took, second_started = threading.Event(), threading.Event()
    taken: dict[str, int] = {}

    @_in_thread
    def first() -> None:
        with write_atomic():
            taken["first"] = services.lock_fence_take(channel)
            first_took.set()
            wait_until(
                lambda: "second" in taken or waits_behind_us(second_started),
                what="the second taker finished or waits for the first",
            )

    @_in_thread
    def second() -> None:
        first_took.wait(10)
        second_started.set()
        with write_atomic():
            taken["second"] = services.lock_fence_take(channel)

    with ThreadPoolExecutor(2) as pool:
        for future in [pool.submit(first), pool.submit(second)]:
            future.result(timeout=30)
    assert taken == {"first": 1, "second": 2}


def test_concurrent_claims_of_one_task_give_one_fence_to_one_owner(make_agent):
    channel = channel_create(name="races", created_by="alice")
    task_services.task_create(channel=channel, created_by="alice", task_id="T", title="t")
    barrier = threading.Barrier(2)

    @_in_thread
    def claim(owner: str) -> str:
        barrier.wait(10)
        try:
            task = task_services.lease_claim(
                channel=channel, task_id="T", actor=owner, duration=FIVE_MINUTES
            )
        except Exception as exc:  # the loser: LEASE_CONFLICT
            return getattr(exc, "code", repr(exc))
        return f"fence {task.fence}"

    with ThreadPoolExecutor(2) as pool:
        outcomes = sorted(pool.map(claim, ["bob", "carol"]))
    assert outcomes == ["LEASE_CONFLICT", "fence 1"]
    assert Task.objects.get(task_id="T").fence == 1
