"""``GET /api/v1/channels/<name>/wait/``: the long-poll wait, a plain ASGI app."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import Any

from django.conf import settings

from agentchat.core.db.transactions import run_db
from agentchat.core.http.asgi_http import (
    Receive,
    Send,
    body_read,
    disconnected,
    failure_send,
    json_send,
    request_check,
)
from agentchat.core.http.pages import limit_parse
from agentchat.core.http.query import query_check
from agentchat.core.http.scope import scope_acting, scope_query, scope_token
from agentchat.core.identity.services import token_authenticate
from agentchat.core.live.stopping import stopping, stopping_refusal
from agentchat.core.rules.validation import number_parse
from channels_app.live import WaitResult, message_wait
from channels_app.selectors import READ_LIMIT_MAX, channel_get

logger = logging.getLogger(__name__)


WAIT_PARAMETERS = {"timeout", "limit"}


def parse_timeout(raw: str | None) -> float:
    timeout = number_parse(
        raw,
        field="timeout",
        code="INVALID_TIMEOUT",
        maximum=settings.AGENTCHAT_WAIT_MAX_TIMEOUT,
        default=settings.AGENTCHAT_WAIT_DEFAULT_TIMEOUT,
    )
    assert timeout is not None
    return timeout


class WaitEndpoint:
    """``GET /api/v1/channels/<name>/wait/?timeout=S&limit=N``: a long-poll as a plain ASGI app.

    While parked it holds no thread and no database connection. A client that disconnects ends
    the wait at once and moves nothing, even when its page is being read on a database thread
    at that moment (``abandoned``). So does the server stopping (``agentchat.core.live.
    stopping``), which answers 503 ``SERVICE_UNAVAILABLE`` with ``Retry-After``: the proxy or
    the client sends the wait again to another process.
    """

    @classmethod
    def as_asgi(cls) -> WaitEndpoint:
        return cls()

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        try:
            request_check(scope, methods={"GET"}, json_only=True)
            # Read the (ignored) body to the end, so the next receive() is the disconnect.
            if await body_read(receive, limit=settings.AGENTCHAT_MAX_REQUEST_BYTES) is None:
                return
            query = scope_query(scope)
            query_check(query, WAIT_PARAMETERS)
            timeout = parse_timeout(query.get("timeout"))
            limit = limit_parse(query.get("limit"), maximum=READ_LIMIT_MAX)
            agent, token = await run_db(
                token_authenticate,
                scope_token(scope, allow_query=False),
                acting=scope_acting(scope),
            )
            channel = await run_db(
                channel_get, scope["url_route"]["kwargs"]["name"], viewer=agent.name
            )
            if stopping():
                raise stopping_refusal()
        except Exception as exc:
            await failure_send(send, exc, log=logger, what="wait failed before parking")
            return
        abandoned = threading.Event()
        answered = asyncio.Event()

        async def deliver(result: WaitResult) -> None:
            # Before the wait leaves the layer: its cursor has moved, its answer goes out now.
            answered.set()
            await json_send(send, 200, result.body())

        waiting = asyncio.ensure_future(
            message_wait(
                channel=channel,
                agent=agent,
                timeout=timeout,
                limit=limit,
                token_id=token.pk,
                abandoned=abandoned,
                deliver=deliver,
            )
        )
        gone = asyncio.ensure_future(disconnected(receive))
        try:
            # The server stopping ends the wait from inside (message_wait raises its refusal
            # at a park point only, never with a cursor move in flight).
            await asyncio.wait({waiting, gone}, return_when=asyncio.FIRST_COMPLETED)
            if answered.is_set() and not waiting.done():
                await asyncio.wait({waiting})  # sent: let it leave the layer
        finally:
            if not waiting.done():
                # First: a cursor move already on a database thread must not commit.
                abandoned.set()
            for task in (waiting, gone):
                task.cancel()
        if not waiting.done() or waiting.cancelled() or answered.is_set():
            return  # the client went away, or it has its answer
        error = waiting.exception()
        if error is None:
            await json_send(send, 200, waiting.result().body())
        else:
            await failure_send(send, error, log=logger, what="wait failed")
