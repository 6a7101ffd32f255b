"""Live push: ring a channel-layer group once the writing transaction has committed.

The push is a doorbell, never the record: receivers re-read the database by seq. Payloads are
round-tripped through JSON when built, so a bad payload fails inside the transaction, not
after the commit.
"""

from __future__ import annotations

import asyncio
import json
import logging
from contextvars import ContextVar
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from agentchat.core.db.transactions import call_on_loop

logger = logging.getLogger(__name__)
EVENT_TYPE = "agentchat.event"


def group_name(kind: str, pk: int) -> str:
    """Layer group names come from ids (user-chosen names may not fit the layer's rules)."""
    return f"agentchat.{kind}.{pk}"


_sending: set[asyncio.Task[None]] = set()

# The event loop of the async code a thread was started from. Context variables follow
# ``sync_to_async`` and ``asyncio.to_thread`` into their threads, so a sync view that Django's
# handler runs in a thread can hand its pushes back to the server's loop.
_home_loop: ContextVar[asyncio.AbstractEventLoop | None] = ContextVar(
    "agentchat_home_loop", default=None
)


def home_loop_set() -> None:
    """Called by async entry points (the ASGI application) on the loop that serves them."""
    _home_loop.set(asyncio.get_running_loop())


def _sent(task: asyncio.Task[None]) -> None:
    _sending.discard(task)
    if not task.cancelled() and task.exception() is not None:
        logger.warning("push failed: %r", task.exception())


def push_now(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": EVENT_TYPE, "event": event}

    def send() -> None:
        task = asyncio.get_running_loop().create_task(layer.group_send(group, message))
        _sending.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(_sent)

    # A database-pool thread hands the send back to its event loop, which runs it with the
    # call's result. A thread started from async code (a sync view run by Django's handler)
    # hands it to that loop. Neither waits: blocking on it (async_to_sync) hung daphne's
    # shutdown once the loop had stopped.
    if call_on_loop(send):
        return
    loop = _home_loop.get()
    if loop is not None and loop.is_running():
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            send()
        else:
            loop.call_soon_threadsafe(send)
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # a lost doorbell is recovered by the receivers' re-read
        logger.exception("push to %s failed", group)


def push_on_commit(group: str, event: dict[str, Any]) -> None:
    payload = json.loads(json.dumps(event))
    transaction.on_commit(lambda: push_now(group, payload), robust=True)
