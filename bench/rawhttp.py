"""A minimal HTTP/1.1 keep-alive client for the benchmarks' load generators.

On this 2-core machine kind the load generator and the server share the CPU. httpx spends
nearly 3 ms of CPU per POST here, eight times this client (``python bench/rawhttp.py URL TOKEN
CHANNEL`` measures both); that CPU is taken from the server being measured and added to every
latency. This client sends pre-built requests over asyncio streams and reads
``Content-Length`` or chunked responses, the way wrk does; it is not a general HTTP client.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any
from urllib.parse import urlsplit


class HttpError(Exception):
    pass


class RawHttp:
    """One keep-alive connection; requests on it run one after another."""

    def __init__(self, url: str, token: str) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or 80
        self._head = (
            f"Host: {self.host}:{self.port}\r\nAuthorization: Bearer {token}\r\n"
            "Accept: application/json\r\n"
        )
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> RawHttp:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._reader = self._writer = None

    async def __aenter__(self) -> RawHttp:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def request(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        """(status, body bytes). ``body`` is sent as JSON when not None."""
        await self.open()
        assert self._reader is not None and self._writer is not None
        payload = b"" if body is None else json.dumps(body).encode()
        head = f"{method} {path} HTTP/1.1\r\n{self._head}"
        if body is not None:
            head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
        self._writer.write(head.encode() + b"\r\n" + payload)
        try:
            raw = await self._reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError as exc:
            await self.close()
            raise HttpError("connection closed before a response") from exc
        lines = raw.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        if "content-length" in headers:
            content = await self._reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            content = await self._read_chunked()
        else:
            content = await self._reader.read()
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, content

    async def _read_chunked(self) -> bytes:
        assert self._reader is not None
        chunks = []
        while True:
            size = int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16)
            if size == 0:
                await self._reader.readuntil(b"\r\n")
                return b"".join(chunks)
            chunks.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)

    async def json(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        status, content = await self.request(method, path, body)
        return status, json.loads(content) if content else None


async def _compare(url: str, token: str, channel: str, n: int = 300) -> None:
    """CPU per request of this client and of httpx, posting to ``channel``."""
    import httpx

    path = f"/api/v1/channels/{channel}/messages/"
    body = {"title": "client cost", "body": "hello world, " * 8}
    async with RawHttp(url, token) as raw:
        cpu = time.process_time()
        for _ in range(n):
            await raw.json("POST", path, body)
        raw_ms = (time.process_time() - cpu) * 1000 / n
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
        cpu = time.process_time()
        for _ in range(n):
            (await c.post(path, json=body)).json()
        httpx_ms = (time.process_time() - cpu) * 1000 / n
    print(f"client CPU per POST: rawhttp {raw_ms:.2f} ms, httpx {httpx_ms:.2f} ms")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: python bench/rawhttp.py URL TOKEN CHANNEL")
    asyncio.run(_compare(*sys.argv[1:4]))
