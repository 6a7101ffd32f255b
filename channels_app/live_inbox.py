"""Live follow of an HTTP v1 inbox's tail (docs/http-v1.md): ``inbox_bell``, the doorbell the
multiplexed websocket's ``inbox`` subscription rings (``channels_app.endpoints.multiplex``),
built as ``channels_app.live``'s streams are: subscribe to the inbox's group, then read the
database, then await a ring; a sweep for a ring the layer lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from agentchat.core.db.transactions import run_db
from agentchat.core.live.layer import group_join, inbox_close, inbox_open
from agentchat.core.live.push import EVENT_TYPE
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from channels_app.inbox import inbox_cursor_check, inbox_tail
from channels_app.live import _sweep_interval, tasks_end
from channels_app.services import inbox_group

logger = logging.getLogger(__name__)


def _inbox_owner(name: str) -> Any:
    """The agent named ``name``. Raises AGENT_NOT_FOUND. Sync."""
    agent = Agent.objects.filter(name=name).first()
    if agent is None:
        raise AppError("AGENT_NOT_FOUND", f"no agent named {name[:64]!r}", detail={"agent": name})
    return agent


class InboxBell:
    """The tail of one agent's HTTP v1 inbox as it moves: iterate it for each new tail, many
    deliveries made meanwhile coming as one (the latest), never one told twice.

    A doorbell only: it says the inbox has deliveries below ``tail`` that the follower may not
    have read, and the follower reads them by cursor (``GET /v1/agents/<id>/inbox``). It learns
    of a delivery by its ring (``services.inbox_group``: the ring's ``seq + 1`` is a tail that
    has committed, seq_nums being commit-ordered) and, for a ring the layer lost, by a look at
    the stored tail every AGENTCHAT_STREAM_SWEEP_SECONDS. It holds no thread and no database
    connection while idle, and a number, whatever the backlog."""

    def __init__(self, *, agent: Any, sweep_seconds: float | None = None) -> None:
        self.agent = agent
        self.told = 0  # the last tail told (or the follower's own starting point)
        self.known = 0  # the highest tail known
        self._wake = asyncio.Event()
        self._sweep_seconds = (
            settings.AGENTCHAT_STREAM_SWEEP_SECONDS if sweep_seconds is None else sweep_seconds
        )

    def ring(self, event: dict[str, Any]) -> None:
        seq = event.get("seq")
        if event.get("kind") == "delivery" and type(seq) is int and seq + 1 > self.known:
            self.known = seq + 1
            self._wake.set()

    def __aiter__(self) -> InboxBell:
        return self

    async def __anext__(self) -> int:
        while self.known <= self.told:
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), _sweep_interval(self._sweep_seconds))
            if self.known <= self.told:
                try:
                    tail = await run_db(inbox_tail, self.agent)
                except Exception:  # keep ringing; the next ring or sweep retries
                    logger.exception("inbox sweep of %s failed", self.agent.name)
                    continue
                self.known = max(self.known, tail)
        self.told = self.known
        return self.told


@contextlib.asynccontextmanager
async def inbox_bell(
    *, name: str, since: int | None, sweep_seconds: float | None = None
) -> AsyncIterator[InboxBell]:
    """``async with inbox_bell(name=…, since=…) as bell:`` the doorbell of ``name``'s inbox
    (``InboxBell``), from the tail ``since`` (None: the current tail, so only deliveries from
    now on are told). It subscribes to the inbox's group, then reads the tail, so no delivery
    committed once the block is entered is missed; ``bell.known`` is the tail read then (a
    ``since`` below it is told at once). Only the inbox's owner may be told (the caller
    checks: ``name`` is its principal). Raises on entry AGENT_NOT_FOUND, INVALID_CURSOR (a
    ``since`` beyond the tail). On exit it leaves the group and frees the layer's inbox."""
    agent = await run_db(_inbox_owner, name)
    layer = get_channel_layer()
    receiver = await inbox_open(layer)  # None: the layer is down (Redis), sweeps only
    bell = InboxBell(agent=agent, sweep_seconds=sweep_seconds)
    groups = [inbox_group(agent.pk)]
    tasks: list[asyncio.Future[Any]] = []
    try:
        rung = receiver is not None and await group_join(layer, groups[0], receiver)
        tail = await run_db(inbox_tail, agent)  # read after the subscription
        if since is not None:
            inbox_cursor_check(since, tail)
        bell.known = tail
        bell.told = tail if since is None else since
        if rung and receiver is not None:
            tasks.append(asyncio.ensure_future(_bell_rings(layer, receiver, bell)))
        yield bell
    finally:
        try:
            await tasks_end(tasks)
        finally:
            await asyncio.shield(inbox_close(layer, receiver, groups))


async def _bell_rings(layer: Any, receiver: str, bell: InboxBell) -> None:
    while True:
        ring = await layer.receive(receiver)
        if ring.get("type") == EVENT_TYPE and isinstance(ring.get("event"), dict):
            bell.ring(ring["event"])
