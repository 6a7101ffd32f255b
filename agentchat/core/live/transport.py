"""Write flow control for websockets: whether the client is keeping up.

ASGI gives an application no way to know that what it sent has left the process: daphne hands
every frame to the connection's Twisted transport, whose write buffer grows without bound
behind a client that stopped reading. The transport knows: once more than its buffer size
(64 KiB) is queued it pauses its producer and sets ``producerPaused``, and clears it when the
buffer has drained (``twisted.internet.abstract.FileDescriptor``; a daphne connection's
producer is its ``HTTPChannel``). This adapter finds the transport behind daphne's ``send`` (a
``functools.partial(server.handle_reply, protocol)``: daphne's own detail, checked here and
nowhere else) and reads that flag. Anywhere else (the tests' communicators, another ASGI
server, daphne serving TLS itself) it knows nothing and never reports the connection full: a
subscriber that stops reading is then bounded by nothing here, so the first such stream of a
process logs a warning. Serve with ``python -m agentchat.serve`` (daphne on plain TCP; TLS in
the reverse proxy), as docs/live.md says.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

logger = logging.getLogger(__name__)

# The server's own ``send``, kept in the scope by the ASGI application before any middleware
# wraps it (Channels' session middleware does, for websockets too).
RAW_SEND = "agentchat.raw_send"
ROOM_POLL_SECONDS = 0.05  # how often a full connection is looked at (only while it is full)


def scope_with_raw_send(scope: dict[str, Any], send: Any) -> dict[str, Any]:
    return {**scope, RAW_SEND: send}


def _daphne_transport(send: Any) -> Any | None:
    if not isinstance(send, functools.partial) or not send.args:
        return None
    if getattr(send.func, "__name__", "") != "handle_reply":
        return None
    transport = getattr(send.args[0], "transport", None)
    if transport is None or not hasattr(transport, "producerPaused"):
        return None
    return transport


_warned = False


def _unsupported_warn() -> None:
    global _warned
    if not _warned:
        _warned = True
        logger.warning(
            "websocket flow control is unavailable under this server: a subscriber that stops "
            "reading is not closed and its frames queue in memory; serve with "
            "`python -m agentchat.serve` (daphne on plain TCP, TLS in the reverse proxy)"
        )


class SendWindow:
    """``full`` while the connection holds more than its transport's buffer; ``room()`` waits
    until it has drained."""

    def __init__(self, scope: dict[str, Any]) -> None:
        self._transport = _daphne_transport(scope.get(RAW_SEND))
        if self._transport is None:
            _unsupported_warn()

    @property
    def supported(self) -> bool:
        return self._transport is not None

    @property
    def full(self) -> bool:
        transport = self._transport
        if transport is None or getattr(transport, "disconnected", False):
            return False
        return bool(transport.producerPaused)

    async def room(self, timeout: float) -> bool:
        """True once the connection has room (at once when it has); False after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self.full:
            if loop.time() >= deadline:
                return False
            await asyncio.sleep(ROOM_POLL_SECONDS)
        return True

    def close(self) -> None:
        self._transport = None
