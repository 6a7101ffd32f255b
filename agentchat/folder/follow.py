"""``sync_folder --follow``: sync again whenever the database may have changed, woken rather
than polling in a tight loop, and across processes (the server is another process).

What wakes it (``Bells``):

- on SQLite, ``PRAGMA data_version`` of the follower's own connection, which changes when any
  other connection (a server process among them) commits; one cheap pragma every ``poll``
  seconds;
- with the Redis channel layer (``REDIS_URL``), the rings the services already push on commit
  to each channel's group (a message, and so every task, lease and lock change, whose audit
  message is a message) and to the roster group (a channel made, a marker claimed), received
  in a thread of its own;
- ``interval`` seconds without either: a sync anyway (what neither announces: a cursor moved
  on PostgreSQL).

The mark is taken before each sync, so a change committed while a sync runs wakes the next
one at once. SIGINT and SIGTERM end the loop after the sync that is running (its files are
each written atomically anyway).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.db import connection

from channels_app.selectors import channel_pk_list
from channels_app.services import ROSTER_GROUP, channel_group


def _redis_layer_configured() -> bool:
    backend = settings.CHANNEL_LAYERS.get("default", {}).get("BACKEND", "")
    return "channels_redis" in backend


class _LayerBell:
    """Subscribed to the channels' groups on the channel layer, in a thread with its own event
    loop; sets ``wake`` whenever a ring arrives."""

    def __init__(self, wake: threading.Event) -> None:
        from channels.layers import get_channel_layer

        self.wake = wake
        self.layer = get_channel_layer()
        self.loop = asyncio.new_event_loop()
        self.subscribed: set[str] = set()
        self.inbox = asyncio.run_coroutine_threadsafe(self.layer.new_channel(), self._start())
        self.inbox_name: str = self.inbox.result(10)
        self.listening = asyncio.run_coroutine_threadsafe(self._listen(), self.loop)

    def _start(self) -> asyncio.AbstractEventLoop:
        self.thread = threading.Thread(
            target=self.loop.run_forever, name="sync-follow-layer", daemon=True
        )
        self.thread.start()
        return self.loop

    async def _listen(self) -> None:
        while True:
            await self.layer.receive(self.inbox_name)
            self.wake.set()

    async def _add(self, groups: list[str]) -> None:
        for group in groups:
            await self.layer.group_add(group, self.inbox_name)
            self.subscribed.add(group)

    def subscribe(self, groups: Iterable[str]) -> None:
        """Listen to these groups too; returns once subscribed (rings from then on wake)."""
        fresh = sorted(set(groups) - self.subscribed)
        if fresh:
            asyncio.run_coroutine_threadsafe(self._add(fresh), self.loop).result(30)

    def close(self) -> None:
        from agentchat.core.live.layer import inbox_close

        async def finish() -> None:
            self.listening.cancel()
            with contextlib.suppress(Exception):
                await inbox_close(self.layer, self.inbox_name, sorted(self.subscribed))

        with contextlib.suppress(Exception):
            asyncio.run_coroutine_threadsafe(finish(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


class Bells:
    """``mark()`` before a sync, ``wait()`` after it: True once something may have changed
    (or ``interval`` passed), False once asked to stop."""

    def __init__(self, *, poll: float, interval: float, stop: threading.Event) -> None:
        self.poll = poll
        self.interval = interval
        self.stop = stop
        self.wake = threading.Event()
        self.sqlite = connection.vendor == "sqlite"
        self.layer = _LayerBell(self.wake) if _redis_layer_configured() else None
        self._version: int | None = None

    def _data_version(self) -> int | None:
        if not self.sqlite:
            return None
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA data_version")
            return int(cursor.fetchone()[0])

    def watch(self, channel_ids: Iterable[int]) -> None:
        if self.layer is not None:
            self.layer.subscribe([ROSTER_GROUP, *(channel_group(pk) for pk in channel_ids)])

    def mark(self) -> None:
        self.wake.clear()
        self._version = self._data_version()

    def wait(self) -> bool:
        deadline = time.monotonic() + self.interval
        while not self.stop.is_set():
            if self.wake.is_set():
                return not self.stop.is_set()
            if self.sqlite and self._data_version() != self._version:
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            self.wake.wait(min(self.poll, left) if self.sqlite else left)
        return False

    def close(self) -> None:
        if self.layer is not None:
            self.layer.close()


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event, wake: Callable[[], None]) -> Any:
    """SIGINT and SIGTERM set ``stop`` (and ring ``wake``) instead of killing the process."""

    def handler(signum: int, frame: Any) -> None:
        stop.set()
        wake()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def follow(
    sync: Callable[[], object],
    *,
    poll: float,
    interval: float,
    stop: threading.Event | None = None,
) -> int:
    """Run ``sync`` now and after every wake until stopped; returns how many syncs ran."""
    stop = stop or threading.Event()
    bells = Bells(poll=poll, interval=interval, stop=stop)
    runs = 0
    try:
        with stop_on_signals(stop, bells.wake.set):
            while not stop.is_set():
                # Subscribed, then marked, then synced: nothing committed after the sync's
                # reads can go unrung.
                bells.watch(channel_pk_list())
                bells.mark()
                sync()
                runs += 1
                if not bells.wait():
                    break
    finally:
        bells.close()
    return runs
