"""A tiny HTTP server answering what a test says, for the answers a real server never gives:
hostile names and bodies, JSON of the wrong shape, an answer dripped a byte at a time."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

DRIP_EVERY = 0.2  # seconds between two bytes of a dripped answer
ENDLESS_CHUNK = 64 * 1024  # bytes of one write of an endless answer


@dataclass
class Fake:
    """``routes[(method, path)]`` (path under ``/api/v1/``, no query): the JSON body answered
    (status 200), or ``(status, body)``, or a list of those answered in turn (the last one
    for every request after); ``None`` in such a list closes the connection without an
    answer (a server process that went away mid-request). Unknown routes: 404 with an
    AgentChat error body.
    ``drip``: every answer is sent a byte every ``DRIP_EVERY`` seconds, headers included.
    ``endless``: every answer is a JSON body that never ends (no Content-Length), sent as fast
    as the client reads it; ``sent`` counts its bytes."""

    routes: dict[tuple[str, str], Any] = field(default_factory=dict)
    drip: bool = False
    endless: bool = False
    sent: int = 0
    url: str = ""
    seen: list[tuple[str, str]] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)  # of every request, in turn
    stop: threading.Event = field(default_factory=threading.Event)

    def answer(self, method: str, path: str) -> tuple[int, bytes]:
        """(status, body); (0, b"") for no answer at all."""
        self.seen.append((method, path))
        key = (method, path.removeprefix("/api/v1/"))
        if key not in self.routes:
            error = {"code": "CHANNEL_NOT_FOUND", "message": f"no route {key}", "detail": {}}
            return 404, json.dumps({"error": error}).encode()
        found = self.routes[key]
        if isinstance(found, list):
            found = found.pop(0) if len(found) > 1 else found[0]
        if found is None:
            return 0, b""
        status, body = found if isinstance(found, tuple) else (200, found)
        if isinstance(body, bytes):
            return status, body
        # Raw UTF-8 (so a C1 control or a bidi override arrives as itself), but a lone
        # surrogate, which no UTF-8 can carry, as JSON's escape.
        text = json.dumps(body, ensure_ascii=False)
        text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
        return status, text.encode()


def _handler(fake: Fake) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            fake.bodies.append(self.rfile.read(length) if length else b"")
            if fake.endless:
                return self._endless()
            status, body = fake.answer(self.command, urlsplit(self.path).path)
            if status == 0:  # no answer: the connection closes
                self.close_connection = True
                return
            head = (
                f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\n\r\n"
            ).encode()
            if not fake.drip:
                self.wfile.write(head + body)
                return
            for byte in head + body:
                if fake.stop.wait(DRIP_EVERY):  # the test is over: stop dripping
                    return
                try:
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                except OSError:  # the client gave up
                    return

        def _endless(self) -> None:
            self.close_connection = True
            self.wfile.write(b"HTTP/1.1 200 X\r\nContent-Type: application/json\r\n\r\n[")
            chunk = b'"' + b"x" * (ENDLESS_CHUNK - 3) + b'",'
            while not fake.stop.is_set():
                try:
                    self.wfile.write(chunk)
                except OSError:  # the client gave up
                    return
                fake.sent += len(chunk)

        do_GET = do_POST = do_PATCH = do_DELETE = _serve

    return Handler


@contextmanager
def fake_server(routes: dict[tuple[str, str], Any] | None = None) -> Iterator[Fake]:
    fake = Fake(routes=dict(routes or {}))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(fake))
    server.daemon_threads = True
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.stop.set()
        server.shutdown()
        server.server_close()
