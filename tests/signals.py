"""Synchronize tests on conditions, never on time (STYLE: tests that synchronize on signals).

- ``until(predicate)`` (async) / ``wait_until(predicate)`` (sync): poll a condition with a
  deadline; fail with a clear message when it never holds.
- ``subscribers(group)``: how many channels of this process the layer holds in ``group`` (the
  layer adapter's probe), e.g. to know that a wait has subscribed.
- ``waits_behind_us(started)``: another thread has started and waits for this thread's open
  transaction (PostgreSQL: a lock wait in pg_stat_activity; SQLite: a ticket at the writer).
- ``layer_kind``: a fixture that runs a test on the in-memory layer and again on Redis.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from channels.layers import get_channel_layer

from agentchat.core.live.layer import group_channels
from tests.conftest import redis_reachable, redis_url_for_tests, require_service


async def until(predicate: Callable[[], Any], *, timeout: float = 10, what: str = "") -> Any:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {what or predicate}")
        await asyncio.sleep(0.005)


def wait_until(predicate: Callable[[], Any], *, timeout: float = 10, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout} s: {what or predicate}")
        time.sleep(0.01)


def waits_behind_us(started: threading.Event) -> bool:
    """The other thread has set ``started`` and now waits for this thread's transaction: on
    PostgreSQL on a lock, on SQLite on the FIFO writer lock.

    PostgreSQL keeps one snapshot of pg_stat_activity for a whole transaction, and the caller
    polls from inside its open transaction: without clearing it each time, a first look taken
    before the other thread blocked is the answer forever."""
    from django.db import connection

    from agentchat.core.db import transactions as core_db

    if not started.is_set():
        return False
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
            )
            return cursor.fetchone()[0] > 0
    writer = core_db._sqlite_writer
    return writer._next_ticket - writer._serving >= 2


@contextlib.contextmanager
def sigint_as_a_terminal_has_it() -> Iterator[None]:
    """Children started in the block get SIGINT as a terminal's command has it. A suite started
    by a shell in the background (`bash -c '…' &`) runs with SIGINT ignored, which a child
    inherits: a Ctrl-C a test sends it would be dropped."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def subscribers(group: str) -> int:
    channels = group_channels(get_channel_layer(), group)
    assert channels is not None, "the layer adapter does not know this layer"
    return len(channels)


def redis_channel_layers(url: str) -> dict[str, Any]:
    """CHANNEL_LAYERS as the settings make them for REDIS_URL=url (with their prefix), so that
    this process rings the same groups as servers started with that URL."""
    import os
    import runpy
    from pathlib import Path

    before = os.environ.get("REDIS_URL")
    os.environ["REDIS_URL"] = url
    try:
        settings_file = Path(__file__).resolve().parent.parent / "agentchat" / "settings.py"
        return runpy.run_path(str(settings_file))["CHANNEL_LAYERS"]
    finally:
        if before is None:
            del os.environ["REDIS_URL"]
        else:
            os.environ["REDIS_URL"] = before


@pytest.fixture(params=["memory", "redis"])
def layer_kind(request: pytest.FixtureRequest, settings: Any) -> str:
    if request.param == "redis":
        url = redis_url_for_tests()
        require_service("Redis", redis_reachable(url), f"no Redis at {url}")
        settings.CHANNEL_LAYERS = redis_channel_layers(url)
    else:
        settings.CHANNEL_LAYERS = {
            "default": {
                "BACKEND": "channels.layers.InMemoryChannelLayer",
                "CONFIG": {"capacity": 1000},
            }
        }
    return request.param
