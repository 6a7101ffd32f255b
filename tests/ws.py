"""Helpers for websocket tests driven in process (``channels.testing.WebsocketCommunicator``)."""

from __future__ import annotations

import json
from typing import Any


async def frames_until_close(client: Any, timeout: float = 5) -> tuple[list[dict], dict]:
    """Every JSON frame the live endpoint sends until it closes, and the close itself (each
    ``receive_output`` waits at most ``timeout``: a live endpoint that never closes fails)."""
    frames: list[dict] = []
    while True:
        output = await client.receive_output(timeout=timeout)
        if output["type"] == "websocket.close":
            return frames, output
        frames.append(json.loads(output["text"]))
