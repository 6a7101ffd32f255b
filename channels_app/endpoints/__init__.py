"""The live endpoints, served before Django (DESIGN §6): plain ASGI applications that
authenticate, parse, call ``channels_app.live`` and render.

They are no Channels consumers, on purpose: ``AsyncHttpConsumer`` buffers a body without a
bound and cannot see a disconnect while a wait is parked.

- ``wait``: ``WaitEndpoint``, ``GET /api/v1/channels/<name>/wait/?timeout=S&limit=N``;
- ``stream``: ``MessageStreamEndpoint``, ``/ws/channels/<name>/[?since=N]``;
- ``multiplex``: ``MultiplexEndpoint``, ``/ws/channels/``, many channels on one connection
  (subscribe and unsubscribe frames), each a ``message_stream`` as the single channel's;
- ``shared``: what they share: close codes, parameter checks, the websocket handshake, the
  pump that sends a stream's frames and the budget of client frames.

Each passes the shared ``request_check`` first (the REST lane's Host, Authorization, method and
Accept rules) and validates everything before it subscribes to anything, so a refused request
leaves nothing behind.
"""

from __future__ import annotations

from channels_app.endpoints.multiplex import MultiplexEndpoint
from channels_app.endpoints.stream import MessageStreamEndpoint
from channels_app.endpoints.wait import WaitEndpoint

__all__ = [
    "MessageStreamEndpoint",
    "MultiplexEndpoint",
    "WaitEndpoint",
]
