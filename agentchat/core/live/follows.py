"""What one agent's live connections may hold: places, and reads in its turn.

- ``heavy_read(key, func, **kwargs)``: a live connection's read of history (an SSE follow's
  page, a websocket's replay batch) runs as a peek does (``agentchat.core.db.heavy``): in the
  agent's turn at the heavy gate (``key``: the lane's ``a<id>``, a signed-in person's
  ``person_key``), ``bounded``, on the heavy pool, within the work budget. So however many
  connections one agent opens, their reads go one at a time behind its other heavy requests,
  fairly beside the other agents', and never on the threads that posts and peeks need.
- ``follow_slots()``: how many live connections of a kind (``"sse"``, ``"ws"``) each key
  holds open. Without Redis a count in this process (the only one: SQLite runs one). With
  ``REDIS_URL`` (several processes) a sorted set per kind and key in Redis, one member per open
  connection scored by its expiry: taking one drops the expired members, counts and adds in one
  script; the process renews its members every third of AGENTCHAT_FOLLOW_SLOT_SECONDS, so a
  process that was killed frees its places after at most that long.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import uuid
import weakref
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any, TypeVar

from django.conf import settings

from agentchat.core.db.heavy import heavy_gate, work_budget
from agentchat.core.db.transactions import run_db_heavy
from agentchat.core.rules.errors import AppError

logger = logging.getLogger(__name__)
T = TypeVar("T")


def _budgeted(func: Callable[..., T], /, **kwargs: Any) -> T:
    with work_budget():
        return func(**kwargs)


def follow_queue() -> int:
    """How many heavy requests of one key may wait when the waiting one is a live read: the
    lane's queue, plus one read per live connection the caps let the key hold (each waits for
    one read at most), so that a live read is never refused HEAVY_REQUEST_BUSY."""
    return (
        settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT
        + max(settings.AGENTCHAT_SSE_MAX_PER_AGENT, settings.AGENTCHAT_SSE_MAX_MONITOR)
        + settings.AGENTCHAT_WS_MAX_PER_AGENT * settings.AGENTCHAT_STREAM_MAX_CHANNELS
    )


async def heavy_read(key: bytes, func: Callable[..., T], /, **kwargs: Any) -> T:
    """``func(**kwargs)`` as a peek runs: in ``key``'s turn at the heavy gate, on the heavy
    pool, within the work budget. A read cancelled (its client left) keeps its turn until its
    thread is done, so the gate never hands out more threads than it has."""

    async def call() -> T:
        running = asyncio.ensure_future(run_db_heavy(_budgeted, func, **kwargs))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            await asyncio.wait([running])
            raise

    result = await heavy_gate().run(key, call, bounded=True, queue=follow_queue())
    return result  # type: ignore[return-value]  # None only for a request given ``gone``


# --- places ---------------------------------------------------------------------------------

Refusal = Callable[[int], AppError]


class FollowSlots:
    """The open connections of each (kind, key) in this process."""

    def __init__(self) -> None:
        self._open: Counter[tuple[str, bytes]] = Counter()

    async def count(self, kind: str, key: bytes) -> int:
        return self._open[kind, key]

    async def take(self, kind: str, key: bytes, limit: int, refusal: Refusal) -> object:
        """A place for one more connection of ``key`` (give it back with ``give``); raises
        ``refusal(limit)`` when ``limit`` are open."""
        if self._open[kind, key] >= limit:
            raise refusal(limit)
        self._open[kind, key] += 1
        return (kind, key)

    async def give(self, place: object) -> None:
        assert isinstance(place, tuple)
        self._open[place] -= 1
        if self._open[place] <= 0:
            del self._open[place]


# KEYS[1] the (kind, key)'s sorted set; ARGV member, limit, time to live (ms). Redis's clock
# for every process, so that their clocks never disagree.
_TAKE = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ms)
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ms + tonumber(ARGV[3]), ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
"""
# KEYS the sets; ARGV the time to live (ms), then for each key one member of this process.
_RENEW = """
local now = redis.call('TIME')
local ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
for i, key in ipairs(KEYS) do
  redis.call('ZADD', key, 'XX', ms + tonumber(ARGV[1]), ARGV[i + 1])
  redis.call('PEXPIRE', key, ARGV[1])
end
return 1
"""


REDIS_WAIT_SECONDS = 2.0  # for a place in Redis; past it, counted in this process


class RedisFollowSlots:
    """The open connections of each (kind, key) across the processes that share ``url``."""

    PREFIX = "agentchat.follows."

    def __init__(self, url: str) -> None:
        import redis.asyncio as redis_asyncio

        self.client: Any = redis_asyncio.Redis.from_url(url)
        self.process = uuid.uuid4().hex
        self._numbers = itertools.count()
        self.held: dict[str, str] = {}  # member -> its set's name
        self._renewing: asyncio.Future[None] | None = None

    @property
    def ttl_ms(self) -> int:
        return int(settings.AGENTCHAT_FOLLOW_SLOT_SECONDS * 1000)

    def name(self, kind: str, key: bytes) -> str:
        return f"{self.PREFIX}{kind}.{key.decode('latin-1')}"

    async def count(self, kind: str, key: bytes) -> int:
        return int(await self.client.zcard(self.name(kind, key)))

    async def take(self, kind: str, key: bytes, limit: int, refusal: Refusal) -> object:
        name = self.name(kind, key)
        member = f"{self.process}:{next(self._numbers)}"
        try:
            taken = await asyncio.wait_for(
                self.client.eval(_TAKE, 1, name, member, limit, self.ttl_ms), REDIS_WAIT_SECONDS
            )
        except Exception as exc:
            # Redis down: the streams go on from the database sweep (docs/deployment.md,
            # faults), so the place is counted in this process alone until it is back.
            logger.warning("could not count the live connections in Redis: %s", exc)
            return await _local.take(kind, key, limit, refusal)
        if not taken:
            raise refusal(limit)
        self.held[member] = name
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew())
        return member

    async def give(self, place: object) -> None:
        if isinstance(place, tuple):  # taken while Redis was down
            await _local.give(place)
            return
        assert isinstance(place, str)
        name = self.held.pop(place, None)
        if name is None:
            return
        try:
            await self.client.zrem(name, place)
        except Exception as exc:  # it expires by itself
            logger.warning("could not free a live connection's place in Redis: %s", exc)

    async def _renew(self) -> None:
        """While this process holds places: renew them every third of their time to live."""
        while self.held:
            await asyncio.sleep(self.ttl_ms / 3000)
            held = list(self.held.items())
            if not held:
                return
            try:
                await self.client.eval(
                    _RENEW,
                    len(held),
                    *(name for _, name in held),
                    self.ttl_ms,
                    *(member for member, _ in held),
                )
            except Exception as exc:  # the next round tries again
                logger.warning("could not renew the live connections' places: %s", exc)


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
_local = FollowSlots()


def follow_slots() -> FollowSlots | RedisFollowSlots:
    """This process's places: in Redis with REDIS_URL (one client per event loop: an asyncio
    client belongs to its loop), else counted here."""
    url = getattr(settings, "REDIS_URL", "")
    if not url:
        return _local
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = RedisFollowSlots(url)
    return slots


@contextlib.asynccontextmanager
async def follow_slot(kind: str, key: bytes, limit: int, refusal: Refusal) -> AsyncIterator[None]:
    """Hold a place of ``kind`` for ``key`` for the block; raises ``refusal(limit)`` on entry
    when ``limit`` are held (across the processes, with Redis)."""
    slots = follow_slots()
    place = await slots.take(kind, key, limit, refusal)
    try:
        yield
    finally:
        await asyncio.shield(slots.give(place))
