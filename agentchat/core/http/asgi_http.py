"""ASGI HTTP plumbing shared by everything served before Django: the API lane, the wait
long-poll, and the websocket handshake checks.

- ``request_check(scope, …)``: the one request-validation path (foreign Host, duplicate
  Authorization, method, Accept), so every surface refuses the same requests with the same
  codes as the REST lane.
- ``body_read`` reads a request body to the end (chunked or not), capped while it is read.
- ``disconnected`` returns when the client goes away.
- ``json_send`` / ``error_send`` answer with a JSON body of declared length; errors go through
  the one renderer, ``agentchat.core.rules.errors.error_render`` (the status from the error table, a
  401 with ``WWW-Authenticate``, a 405 with its ``Allow``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import Any
from urllib.parse import parse_qsl

from django.conf import settings
from django.http.request import MediaType, split_domain_port, validate_host

from agentchat.core.db.faults import fault_or_internal
from agentchat.core.rules.errors import AppError, error_render
from agentchat.core.rules.validation import request_too_large

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}
_ACCEPT_MAX = 4096  # longer Accept headers are not parsed (nothing legitimate is that long)


def scope_headers(scope: dict[str, Any], name: bytes) -> list[str]:
    """Every value of header ``name`` (lowercase), decoded as latin-1 like WSGI does."""
    return [value.decode("latin-1") for key, value in scope.get("headers", ()) if key == name]


def scope_host(scope: dict[str, Any]) -> str | None:
    """The host the client asked for, as Django's ``HttpRequest.get_host`` finds it; None when
    the scope names none at all (no Host header and no server address: an in-process caller,
    never a request from the network, where daphne always sets the server address)."""
    if settings.USE_X_FORWARDED_HOST and (forwarded := scope_headers(scope, b"x-forwarded-host")):
        return forwarded[0]
    if host := scope_headers(scope, b"host"):
        return host[0]
    server = scope.get("server")
    if not server:
        return None
    return server[0] if server[1] is None else f"{server[0]}:{server[1]}"


def host_allowed(host: str) -> bool:
    allowed = settings.ALLOWED_HOSTS
    if settings.DEBUG and not allowed:
        allowed = [".localhost", "127.0.0.1", "[::1]"]  # as Django does
    domain, _ = split_domain_port(host)
    return bool(domain) and validate_host(domain, allowed)


def accepts_json(scope: dict[str, Any]) -> bool:
    """Whether the request's Accept headers allow an ``application/json`` answer."""
    values = scope_headers(scope, b"accept")
    if not values or all(not value.strip() for value in values):
        return True
    raw = ",".join(values)
    if len(raw) > _ACCEPT_MAX:
        return False
    for part in raw.split(","):
        if not part.strip():
            continue
        media = MediaType(part)
        if media.quality > 0 and (media.main_type, media.sub_type) in {
            ("*", "*"),
            ("application", "*"),
            ("application", "json"),
        }:
            return True
    return False


def _query_check(scope: dict[str, Any]) -> None:
    seen: set[str] = set()
    for key, _ in parse_qsl(
        scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True
    ):
        if key in seen:
            raise AppError(
                "INVALID_VALUE",
                f"query parameter {key!r} is given more than once",
                detail={"parameter": key},
            )
        seen.add(key)


def request_check(
    scope: dict[str, Any],
    *,
    methods: Collection[str] | None = None,
    json_only: bool = False,
) -> None:
    """Refuse what no endpoint serves, in the same order and with the same codes everywhere:
    several Host headers or one outside ALLOWED_HOSTS (400 INVALID_HOST), a query parameter
    given twice (400 INVALID_VALUE: which value would count?), several Authorization headers (401
    AUTH_INVALID: which one would be the caller?) or AgentChat-As headers (400 INVALID_VALUE), a
    method not in ``methods`` (405
    METHOD_NOT_ALLOWED, ``detail.allow``), and with ``json_only`` an Accept that excludes JSON
    (406 NOT_ACCEPTABLE). The lane leaves methods and Accept to each DRF view, which knows its
    own methods and renderers."""
    if len(scope_headers(scope, b"host")) > 1 or len(scope_headers(scope, b"x-forwarded-host")) > 1:
        raise AppError("INVALID_HOST", "send one Host header, not several")
    host = scope_host(scope)
    if host is not None and not host_allowed(host):
        raise AppError("INVALID_HOST", "the Host header is not allowed")
    _query_check(scope)
    if len(scope_headers(scope, b"authorization")) > 1:
        raise AppError("AUTH_INVALID", "send one Authorization header, not several")
    if len(scope_headers(scope, b"agentchat-as")) > 1:
        raise AppError(
            "INVALID_VALUE",
            "send one AgentChat-As header, not several",
            detail={"field": "AgentChat-As"},
        )
    method = scope.get("method")
    if methods is not None and method is not None and method not in methods:
        allow = sorted(methods)
        raise AppError(
            "METHOD_NOT_ALLOWED", f"method {method} not allowed", detail={"allow": allow}
        )
    if json_only and not accepts_json(scope):
        raise AppError("NOT_ACCEPTABLE", "this endpoint answers application/json only")


async def body_read(receive: Receive, *, limit: int) -> bytes | None:
    """The whole request body, however it was framed (daphne has already undone chunked
    transfer coding); None when the client went away first. Raises REQUEST_TOO_LARGE as soon as
    more than ``limit`` bytes arrived, without keeping them."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise request_too_large(limit)
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


async def disconnected(receive: Receive) -> None:
    """Returns when the client disconnects (call it once the body has been read)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def json_send(
    send: Send, status: int, body: bytes, headers: dict[str, str] | Iterable[tuple[str, str]] = ()
) -> None:
    """Send a complete JSON response with its length declared."""
    extra = headers.items() if isinstance(headers, dict) else headers
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in SECURITY_HEADERS.items()),
        *((k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in extra),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})


async def error_send(send: Send, exc: AppError) -> None:
    rendered = error_render(exc)
    await json_send(send, rendered.status, rendered.content(), rendered.headers)


async def failure_send(send: Send, exc: BaseException, *, log: logging.Logger, what: str) -> None:
    """The answer of a request that failed before its response started: an ``AppError`` as
    itself, a database fault as its 503/507 (``fault_or_internal``); anything else logged on
    ``log`` (``what``, with its traceback) and answered as the error table's 500."""
    if isinstance(exc, AppError):
        await error_send(send, exc)
        return
    refusal = fault_or_internal(exc)  # the database down: 503 DATABASE_UNAVAILABLE, not 500
    if refusal.code == "INTERNAL_ERROR":
        log.error(what, exc_info=exc)
    await error_send(send, refusal)


async def websocket_refuse(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """A websocket route that refuses every handshake (HTTP 403: daphne has no other refusal),
    for paths no live endpoint serves. Never an exception, which daphne turns into a 500."""
    if (await receive())["type"] == "websocket.connect":
        await send({"type": "websocket.close"})


async def target_refuse(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Refuse a request whose target is not a path (400 INVALID_VALUE; a websocket handshake
    gets 403)."""
    if scope["type"] == "websocket":
        await websocket_refuse(scope, receive, send)
        return
    error = AppError(
        "INVALID_VALUE",
        "the request target must be a path (origin-form), not an absolute URI",
        detail={"field": "request-target"},
    )
    await error_send(send, error)
