"""Flow control that cannot work says so: a stream under a server whose transport it cannot
see (another ASGI server, daphne serving TLS itself) logs one warning per process."""

from __future__ import annotations

import functools
import logging

from agentchat.core import transport
from agentchat.core.transport import RAW_SEND, SendWindow


def test_an_unknown_server_is_warned_of_once(monkeypatch, caplog):
    monkeypatch.setattr(transport, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="agentchat.core.transport"):
        windows = [SendWindow({RAW_SEND: object()}), SendWindow({})]
    assert [w.supported for w in windows] == [False, False]
    assert [r.getMessage()[:40] for r in caplog.records] == [
        "websocket flow control is unavailable un"
    ]


def test_daphne_plain_tcp_is_seen_and_not_warned_of(monkeypatch, caplog):
    class Transport:
        producerPaused = True

    class Protocol:
        transport = Transport()

    def handle_reply(protocol, message):  # daphne's own name for it
        pass

    monkeypatch.setattr(transport, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="agentchat.core.transport"):
        window = SendWindow({RAW_SEND: functools.partial(handle_reply, Protocol())})
    assert (window.supported, window.full) == (True, True)
    assert caplog.records == []
