"""Flow control that cannot work says so: a stream under a server whose transport it cannot
see (another ASGI server, daphne serving TLS itself) logs one warning per process."""

from __future__ import annotations

import asyncio
import json
import logging

import websockets

from agentchat.core.live import transport
from agentchat.core.live.transport import RAW_SEND, SendWindow


def test_an_unknown_server_is_warned_of_once(monkeypatch, caplog):
    monkeypatch.setattr(transport, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="agentchat.core.live.transport"):
        windows = [SendWindow({RAW_SEND: object()}), SendWindow({})]
    assert [w.supported for w in windows] == [False, False]
    assert [r.getMessage()[:40] for r in caplog.records] == [
        "websocket flow control is unavailable un"
    ]


def test_daphne_plain_tcp_is_seen_and_not_warned_of(live, make_agent):
    """Under the server the project runs (``python -m agentchat.serve``: daphne on plain TCP),
    the window finds the connection's transport behind daphne's ``send``: a websocket served
    there logs no warning. (That it reads the transport's fullness right, the hostile and slow
    subscriber tests show: their clients are closed only because the window saw them full.)"""
    _, token = make_agent("alice")

    async def subscribed() -> dict:
        async with websockets.connect(
            f"{live.ws_url}/ws/channels/",
            additional_headers={"Authorization": f"Bearer {token}"},
        ) as ws:
            # Any answer means the live endpoint ran, and made its window, before it.
            await ws.send(json.dumps({"op": "unsubscribe", "channel": "nowhere"}))
            return json.loads(await asyncio.wait_for(ws.recv(), 10))

    assert asyncio.run(subscribed())["type"] == "unsubscribed"
    assert "flow control is unavailable" not in live.output()
