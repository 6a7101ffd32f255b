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

_stopping: asyncio.Event | None = None


def _event() -> asyncio.Event:
    global _stopping
    if _stopping is None:
        _stopping = asyncio.Event()
    return _stopping


def stopping_begin() -> None:
    """Wake every wait: the server is stopping. On the event loop's thread."""
    _event().set()


def stopping() -> bool:
    return _stopping is not None and _stopping.is_set()


async def stopping_wait() -> None:
    await _event().wait()


def stopping_refusal() -> AppError:
    return AppError(
        "SERVICE_UNAVAILABLE",
        "the server is stopping (a restart or a deploy): send the request again, to any process",
        detail={"reason": "stopping", "retry_after": 1},
    )
