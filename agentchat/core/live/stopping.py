"""The server is stopping (SIGTERM, a deploy roll; ``agentchat.serve``): what a parked wait
awaits beside its ring, so that it answers now instead of being cut off.

``agentchat.serve`` calls ``stopping_begin()`` on the event loop's thread once it has stopped
listening; a wait parked then, or one that parks after, answers 503 ``SERVICE_UNAVAILABLE``
(``stopping_refusal()``, ``Retry-After: 1``) and moves no cursor: the proxy sends the GET to
another process, or the client retries. Nothing else in the process changes.
"""

from __future__ import annotations

import asyncio

from agentchat.core.rules.errors import AppError

_stopping = False
_waiters: set[asyncio.Future[None]] = set()


def stopping_begin() -> None:
    """Wake every wait: the server is stopping. On the event loop's thread."""
    global _stopping
    _stopping = True
    for waiter in list(_waiters):
        if not waiter.done():
            waiter.get_loop().call_soon_threadsafe(_resolve, waiter)


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def stopping() -> bool:
    return _stopping


async def stopping_wait() -> None:
    """Returns once the server stops (never, in most processes' lives)."""
    if _stopping:
        return
    waiter = asyncio.get_running_loop().create_future()
    _waiters.add(waiter)
    try:
        await waiter
    finally:
        _waiters.discard(waiter)


def stopping_refusal() -> AppError:
    return AppError(
        "SERVICE_UNAVAILABLE",
        "the server is stopping (a restart or a deploy): send the request again, to any process",
        detail={"reason": "stopping", "retry_after": 1},
    )
