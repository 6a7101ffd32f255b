"""Revocation ends live sessions (DESIGN §5): parked waits, websockets and, later, SSE streams.

A session opened with a token registers here (``token_watch``) and gets an ``asyncio.Event``
that is set once the token is revoked. One watcher task per event loop learns of revocations
two ways:

- a ring: ``token_revoke`` rings the ``REVOCATIONS_GROUP`` on commit, which the watcher joins
  once for the whole process; through Redis this reaches every process at once;
- a look in the database every AGENTCHAT_REVOCATION_CHECK_SECONDS for the tokens of the open
  sessions (one query, however many sessions), because a ring is at most once and cannot leave
  a process on the in-memory layer (``manage.py revoke_agent_tokens`` runs in a process of its
  own).

Sessions also check the token in the transaction that moves a cursor (``token_is_live``), so a
revoked token never moves one, whatever the watcher has seen so far.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from agentchat.core.db import run_db
from agentchat.core.layer import inbox_close
from agentchat.core.models import ApiToken
from agentchat.core.push import EVENT_TYPE, group_name

logger = logging.getLogger(__name__)

REVOCATIONS_GROUP = group_name("tokens", 0)
REVOKED_KIND = "token.revoked"
_CHECK_CHUNK = 500  # token ids per query (SQLite bounds the number of parameters)


def tokens_revoked(token_ids: Iterable[int]) -> set[int]:
    """Of ``token_ids``, those revoked or gone. Sync: run it on the database pool."""
    wanted = sorted(set(token_ids))
    live: set[int] = set()
    for start in range(0, len(wanted), _CHECK_CHUNK):
        chunk = wanted[start : start + _CHECK_CHUNK]
        live.update(
            ApiToken.objects.filter(pk__in=chunk, revoked_at__isnull=True).values_list(
                "pk", flat=True
            )
        )
    return set(wanted) - live


def token_is_live(token_id: int) -> bool:
    """Whether the token still authenticates (sync; call it inside the write transaction)."""
    return ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).exists()


class _Watcher:
    """The sessions of one event loop, by token id, and the task that ends them."""

    def __init__(self) -> None:
        self.sessions: dict[int, set[asyncio.Event]] = {}
        self.task: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()

    def open(self, token_id: int) -> asyncio.Event:
        revoked = asyncio.Event()
        self.sessions.setdefault(token_id, set()).add(revoked)
        if self.task is None or self.task.done():
            self.subscribed = asyncio.Event()
            self.task = asyncio.get_running_loop().create_task(self.run())
        return revoked

    def close(self, token_id: int, revoked: asyncio.Event) -> None:
        events = self.sessions.get(token_id)
        if events is not None:
            events.discard(revoked)
            if not events:
                del self.sessions[token_id]

    def revoke(self, token_ids: Iterable[int]) -> None:
        for token_id in token_ids:
            for event in self.sessions.pop(token_id, ()):
                event.set()

    async def run(self) -> None:
        """Runs for the life of the loop once a session has opened: it holds one inbox in the
        revocations group and looks in the database only while sessions are open."""
        layer = get_channel_layer()
        loop = asyncio.get_running_loop()
        interval = settings.AGENTCHAT_REVOCATION_CHECK_SECONDS
        inbox = None
        receiving: asyncio.Future[Any] | None = None
        try:
            if layer is not None:
                try:
                    inbox = await layer.new_channel()
                    await layer.group_add(REVOCATIONS_GROUP, inbox)
                except Exception:  # the database looks still end revoked sessions
                    logger.exception("joining the revocations group failed")
            self.subscribed.set()
            next_check = loop.time() + interval
            while True:
                if receiving is None and inbox is not None:
                    # Never cancelled while the watcher runs: a cancelled receive makes the
                    # Redis layer drop the inbox's subscription.
                    receiving = asyncio.ensure_future(layer.receive(inbox))
                waiting = {receiving} if receiving is not None else set()
                remaining = max(0.0, next_check - loop.time())
                if waiting:
                    await asyncio.wait(waiting, timeout=remaining)
                else:
                    await asyncio.sleep(remaining)
                if receiving is not None and receiving.done():
                    done, receiving = receiving, None
                    try:
                        ring = done.result()
                    except Exception:  # a broken layer connection: retry at the next turn
                        logger.exception("receiving revocation rings failed")
                        await asyncio.sleep(min(interval, 1.0))
                        continue
                    event = ring.get("event", {}) if ring.get("type") == EVENT_TYPE else {}
                    if event.get("kind") == REVOKED_KIND:
                        self.revoke(event.get("token_ids", ()))
                if loop.time() >= next_check:
                    next_check = loop.time() + interval
                    if self.sessions:
                        try:
                            self.revoke(await run_db(tokens_revoked, list(self.sessions)))
                        except Exception:  # the next look retries
                            logger.exception("checking the live sessions' tokens failed")
        finally:
            self.subscribed.set()  # never leave a session waiting on a watcher that is gone
            if receiving is not None:
                receiving.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await receiving
            if inbox is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(inbox_close(layer, inbox, [REVOCATIONS_GROUP]))


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watcher] = (
    weakref.WeakKeyDictionary()
)


def _watcher() -> _Watcher:
    loop = asyncio.get_running_loop()
    watcher = _watchers.get(loop)
    if watcher is None:
        watcher = _watchers[loop] = _Watcher()
    return watcher


@contextlib.asynccontextmanager
async def token_watch(token_id: int | None) -> AsyncIterator[asyncio.Event]:
    """``async with token_watch(token.pk) as revoked:`` ``revoked`` is set once the token is
    revoked; a session without a token (a browser's) gets an event that is never set."""
    if token_id is None:
        yield asyncio.Event()
        return
    watcher = _watcher()
    revoked = watcher.open(token_id)
    # Joined before the session goes on, so a revocation from now on rings it.
    await watcher.subscribed.wait()
    try:
        yield revoked
    finally:
        watcher.close(token_id, revoked)
