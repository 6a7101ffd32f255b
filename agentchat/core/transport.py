"""Write flow control for websockets: whether the client is keeping up.

ASGI gives an application no way to know that what it sent has left the process: daphne
queues every frame in the connection's Twisted transport, which grows without bound behind a
client that stopped reading. The one place that knows is the transport, and Twisted has a
public interface for it, the push producer (``IPushProducer``): registered on a transport, it
is paused when more than the transport's write buffer (64 KiB) is queued and resumed once that
has drained. This adapter finds the transport behind daphne's ``send`` (a
``functools.partial(server.handle_reply, protocol)``, daphne's own detail, checked here and
nowhere else) and registers a producer on it. Anywhere else (the tests' communicators, another
server) it knows nothing and never reports the connection full.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any

logger = logging.getLogger(__name__)

try:
    from twisted.internet.interfaces import IPushProducer
    from zope.interface import implementer
except ImportError:  # pragma: no cover - daphne depends on Twisted

    def implementer(*_: Any) -> Any:
        return lambda cls: cls

    IPushProducer = None


def _daphne_protocol(send: Any) -> Any | None:
    if not isinstance(send, functools.partial) or not send.args:
        return None
    if getattr(send.func, "__name__", "") != "handle_reply":
        return None
    protocol = send.args[0]
    if not callable(getattr(protocol, "registerProducer", None)):
        return None
    return protocol


@implementer(IPushProducer)
class SendWindow:
    """``full`` while the connection holds more than its transport's buffer; ``room()`` waits
    until it drained. ``close()`` when the connection's application ends."""

    def __init__(self, send: Any) -> None:
        self._ready = asyncio.Event()
        self._ready.set()
        self._protocol = None
        protocol = _daphne_protocol(send)
        if protocol is not None:
            try:
                protocol.registerProducer(self, True)
                self._protocol = protocol
            except Exception:  # another producer, or already disconnected: no flow control
                logger.debug("no flow control on %r", protocol, exc_info=True)

    @property
    def supported(self) -> bool:
        return self._protocol is not None

    @property
    def full(self) -> bool:
        return not self._ready.is_set()

    async def room(self, timeout: float) -> bool:
        """True once the connection has room (at once when it has); False after ``timeout``."""
        if self._ready.is_set():
            return True
        try:
            await asyncio.wait_for(self._ready.wait(), timeout)
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        protocol, self._protocol = self._protocol, None
        if protocol is not None:
            transport = getattr(protocol, "transport", None)
            if transport is not None and getattr(transport, "producer", None) is self:
                try:
                    protocol.unregisterProducer()
                except Exception:
                    logger.debug("unregistering the producer failed", exc_info=True)
        self._ready.set()

    # IPushProducer, called by Twisted on the event loop's thread (daphne runs Twisted's
    # asyncio reactor).
    def pauseProducing(self) -> None:
        self._ready.clear()

    def resumeProducing(self) -> None:
        self._ready.set()

    def stopProducing(self) -> None:
        self._ready.set()  # the connection is gone: nothing is waiting for room any more
