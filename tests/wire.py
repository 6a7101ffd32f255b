"""Raw wire helpers for what ordinary clients will not send."""

from __future__ import annotations

import socket


def ws_handshake_status(port: int, path: str, headers: list[tuple[str, str]]) -> int:
    """The HTTP status a raw websocket handshake gets (headers sent exactly as given)."""
    lines = [
        f"GET {path} HTTP/1.1",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *(f"{k}: {v}" for k, v in headers),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            if not chunk:
                break
            answer += chunk
    return int(answer.split(b" ", 2)[1])
