"""Follow an HTTP v1 event stream (``/v1/agents/<id>/inbox``, ``/v1/monitor``) for ever,
reconnecting by itself from the last delivered cursor.

``follow(client, path, cursor=...)`` yields each ``event: envelope`` as ``(id, data)``: the id is
the cursor after the delivery, the data its JSON text as the server sent it. A dropped
connection, a stopped or restarting server, a stream the server ended (a reader too slow, a
5xx) are reconnected after a capped backoff, with ``Last-Event-ID`` set to the last id
delivered (the first connection sends the caller's ``cursor=``), so nothing is lost and nothing
repeated. A refusal (4xx: a revoked token, another agent's inbox, a bad cursor) and an
``event: error`` the server ends the stream with are raised as ``ClientError``: retrying would
be refused again.

Bounded: an event longer than ``MAX_EVENT_BYTES`` is RESPONSE_TOO_LARGE; a connection silent
for ``READ_TIMEOUT`` seconds (the server sends a heartbeat at least every 15 s) is reconnected.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx

from agentchat.client.api import Client
from agentchat.client.errors import ClientError

# A delivery is at most about 1 MiB of text and data, escaped in JSON up to six times that.
MAX_EVENT_BYTES = 8 * 1024 * 1024
READ_TIMEOUT = 45.0  # three missed heartbeats
RECONNECT_FIRST = 0.1
RECONNECT_CAP = 2.0


def parse_events(chunks: Iterator[bytes]) -> Iterator[tuple[str, str | None, str]]:
    """The events of a Server-Sent Events byte stream as (event type, id or None, data), in the
    order the standard parses them (comments skipped, a blank line dispatches)."""
    buffer = b""
    kind, event_id, size = "message", None, 0
    data: list[str] = []
    for chunk in chunks:
        buffer += chunk
        while True:
            cut = buffer.find(b"\n")
            if cut < 0:
                if len(buffer) > MAX_EVENT_BYTES:
                    raise _too_large()
                break
            raw, buffer = buffer[:cut].rstrip(b"\r"), buffer[cut + 1 :]
            size += len(raw)
            if size > MAX_EVENT_BYTES:
                raise _too_large()
            line = raw.decode("utf-8", "replace")
            if not line:
                if data:
                    yield kind, event_id, "\n".join(data)
                kind, data, size = "message", [], 0
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "event":
                kind = value
            elif name == "data":
                data.append(value)
            elif name == "id" and "\0" not in value:
                event_id = value


def _too_large() -> ClientError:
    return ClientError(
        "RESPONSE_TOO_LARGE", f"an event of the stream passed {MAX_EVENT_BYTES} bytes"
    )


def _stream_error(data: str) -> ClientError:
    try:
        error = json.loads(data)["error"]
        return ClientError(error["code"], str(error["message"]), error.get("detail") or {})
    except (ValueError, KeyError, TypeError):
        return ClientError("BAD_RESPONSE", "the stream ended with an error event of no shape")


def follow(
    client: Client, path: str, *, cursor: str | None = None, token: str | None = None
) -> Iterator[tuple[str, str]]:
    """Every delivery of the event stream at ``path`` from ``cursor``, reconnecting (see the
    module); ``token`` replaces the client's (the monitor's admin token)."""
    last: str | None = None
    delay = RECONNECT_FIRST
    headers = {"Accept": "text/event-stream"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    timeout = httpx.Timeout(READ_TIMEOUT, connect=5.0)
    while True:
        params: dict[str, Any] = {}
        sent = dict(headers)
        if last is not None:
            sent["Last-Event-ID"] = last
        elif cursor is not None:
            params["cursor"] = cursor
        try:
            with client._http.stream(
                "GET", path, params=params, headers=sent, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    response.read()
                    error = client._error(
                        response,
                        response.headers.get("content-type", "").startswith("application/json"),
                    )
                    if not (error.transient or response.status_code >= 500):
                        raise error
                else:
                    delay = RECONNECT_FIRST
                    for kind, event_id, data in parse_events(response.iter_raw()):
                        if kind == "error":
                            error = _stream_error(data)
                            if error.code not in ("INTERNAL_ERROR",):
                                raise error
                        elif kind == "envelope" and event_id is not None:
                            last = event_id
                            yield event_id, data
        except httpx.TransportError:
            pass  # dropped, refused, silent past READ_TIMEOUT: reconnect
        time.sleep(delay)
        delay = min(delay * 2, RECONNECT_CAP)
