"""``agentchat.core.db.transactions.FifoLock``, SQLite's in-process writer queue: one holder at a
time, and waiters served in the order they arrived (a ticket lock), so no writer starves."""

from __future__ import annotations

import sys
import threading

from agentchat.core.db.transactions import FifoLock
from tests.signals import wait_until


def _queued(lock: FifoLock) -> int:
    """How many have taken a ticket (the holder included). Read under the lock's condition: a
    thread counted here is either the holder or asleep in its wait, never half-way."""
    with lock._cond:
        return lock._next_ticket


def test_waiters_are_served_in_arrival_order_one_at_a_time():
    lock = FifoLock()
    lock.acquire()  # held by the test while the others queue up
    order: list[int] = []
    inside = 0
    overlaps: list[int] = []
    counted = threading.Lock()

    def writer(n: int) -> None:
        nonlocal inside
        lock.acquire()
        try:
            with counted:
                inside += 1
                overlaps.append(inside)
            order.append(n)
            with counted:
                inside -= 1
        finally:
            lock.release()

    threads = []
    for n in range(8):
        thread = threading.Thread(target=writer, args=(n,))
        thread.start()
        threads.append(thread)
        # The next one starts only once this one waits in the queue: arrival order is n's.
        wait_until(lambda n=n: _queued(lock) == n + 2, what=f"writer {n} queued")
    assert order == []  # nobody got in while the test held it
    lock.release()
    for thread in threads:
        thread.join(10)
    assert order == list(range(8))
    assert overlaps == [1] * 8  # never two inside at once


def test_a_waiter_gets_in_only_when_the_holder_releases():
    lock = FifoLock()
    lock.acquire()
    got_in = threading.Event()

    def waiter() -> None:
        lock.acquire()
        got_in.set()
        lock.release()

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_until(lambda: _queued(lock) == 2, what="the waiter queued")
    assert not got_in.is_set()  # it is asleep in the queue, not inside
    lock.release()
    assert got_in.wait(10)
    thread.join(10)
    lock.acquire()  # free again: the next ticket is served at once
    lock.release()


def test_many_writers_exclude_each_other():
    # Threads switch every microsecond: without the lock, read-then-write loses increments.
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    lock = FifoLock()
    total = 0

    def writer() -> None:
        nonlocal total
        for _ in range(2000):
            lock.acquire()
            try:
                seen = total
                total = seen + 1
            finally:
                lock.release()

    threads = [threading.Thread(target=writer) for _ in range(6)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        sys.setswitchinterval(before)
    assert total == 6 * 2000
