"""Live push: ring a channel-layer group once the writing transaction has committed.

The push is a doorbell, never the record: receivers re-read the database by seq. Payloads are
round-tripped through JSON when built, so a bad payload fails inside the transaction, not
after the commit.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from asgiref.sync import SyncToAsync, async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

from agentchat.core.db import db_thread_loop

logger = logging.getLogger(__name__)
EVENT_TYPE = "agentchat.event"


def group_name(kind: str, pk: int) -> str:
    """Layer group names come from ids (user-chosen names may not fit the layer's rules)."""
    return f"agentchat.{kind}.{pk}"


def _log_failure(future: Any) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("push failed: %r", future.exception())


def push_now(group: str, event: dict[str, Any]) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    message = {"type": EVENT_TYPE, "event": event}
    # Inside a thread that works for the server's event loop (the database pool, or a request
    # thread started by sync_to_async) the loop is known: hand the send to it and do not wait.
    # Blocking on it (async_to_sync) hung daphne's shutdown when the loop stopped first.
    loop = db_thread_loop() or getattr(SyncToAsync.threadlocal, "main_event_loop", None)
    if loop is not None and loop.is_running():
        future = asyncio.run_coroutine_threadsafe(layer.group_send(group, message), loop)
        future.add_done_callback(_log_failure)
        return
    try:
        async_to_sync(layer.group_send)(group, message)
    except Exception:  # a lost doorbell is recovered by the receivers' re-read
        logger.exception("push to %s failed", group)


def push_on_commit(group: str, event: dict[str, Any]) -> None:
    payload = json.loads(json.dumps(event))
    transaction.on_commit(lambda: push_now(group, payload), robust=True)
