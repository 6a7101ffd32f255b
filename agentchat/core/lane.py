"""The API lane: ``/api/`` requests go straight from ASGI to their DRF view.

Through Django's ASGI handler every request starts threads of its own, walks the browser
middleware (sessions, CSRF, messages, static files) with a thread hand-off around each sync
one, and opens and closes its own database connection. The token API needs none of that: here
the view runs in one hop on the database pool (``run_db``), whose long-lived threads keep their
SQLite connection. The views, their parsing, authentication and error mapping are the same DRF
code as through Django; only the envelope differs: the body is capped while it is read, the host
is validated, a few security headers are set and the length is declared. The API tests go this
way too (``tests/asgi_client.py``: in process, through ``agentchat.asgi.application``).

What the lane skips, so that nothing under ``/api/`` may rely on it:

- **Middleware**, all of ``settings.MIDDLEWARE``: no ``request.session`` and no session user
  (``AuthenticationMiddleware``), no CSRF check (``CsrfViewMiddleware``; harmless while every
  API call authenticates with a bearer token, which a browser does not attach by itself), no
  messages framework, no ``APPEND_SLASH`` redirect (an API path without its slash is a 404
  that says so), no whitenoise, and only the headers in ``SECURITY_HEADERS`` (no HSTS, COOP or
  SSL redirect from ``SecurityMiddleware``).
- **Request signals**: ``request_started``, ``request_finished`` (Django closes old database
  connections on them; here ``run_db`` manages connections) and ``got_request_exception`` (an
  unhandled error is logged here and answered 500 ``INTERNAL_ERROR``); and Django's
  ``handler404`` / ``handler500`` (the lane answers those codes itself).

So the dashboard of a later issue must not serve its session-authenticated pages, forms or JSON
fragments under ``/api/``: there they would find no session, no logged-in user and no CSRF
protection. Its routes go through Django (``agentchat.urls``, outside ``/api/``) with the full
middleware; anything it needs on every request belongs in middleware there, not in a request
signal that the API would skip.
"""

from __future__ import annotations

import io
import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, get_resolver, set_script_prefix

from agentchat.core.db import run_db
from agentchat.core.errors import AppError, error_http_response, internal_error

logger = logging.getLogger(__name__)

SECURITY_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
}


class _TooLarge(Exception):
    pass


async def _read_body(receive: Any, limit: int) -> bytes | None:
    """The request body, or None when the client went away. Raises _TooLarge past ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise _TooLarge
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


class ApiLane:
    def __init__(self) -> None:
        # Django's own request and response conversions; its middleware chain is not used.
        self.django = ASGIHandler()
        self.resolver = get_resolver()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        limit = settings.AGENTCHAT_MAX_REQUEST_BYTES
        try:
            body = await _read_body(receive, limit)
        except _TooLarge:
            error = AppError(
                "REQUEST_TOO_LARGE", f"request body is over {limit} bytes", detail={"limit": limit}
            )
            await self.django.send_response(error_http_response(error), send)
            return
        if body is None:
            return
        set_script_prefix(scope.get("root_path", "") or "/")
        request, error_response = self.django.create_request(scope, io.BytesIO(body))
        if request is None:
            await self.django.send_response(error_response, send)
            return
        response = await run_db(self.get_response, request)
        for header, value in SECURITY_HEADERS.items():
            response.headers.setdefault(header, value)
        if not response.streaming and "Content-Length" not in response:
            # Without it the body goes out chunked (as Django's CommonMiddleware would avoid).
            response.headers["Content-Length"] = str(len(response.content))
        await self.django.send_response(response, send)

    def get_response(self, request: HttpRequest) -> HttpResponse:
        try:
            request.get_host()
            match = self.resolver.resolve(request.path_info)
        except DisallowedHost:
            return error_http_response(AppError("INVALID_HOST", "the Host header is not allowed"))
        except Resolver404:
            hint = ""
            if not request.path_info.endswith("/"):
                hint = " (API paths end with a slash)"
            return error_http_response(AppError("NOT_FOUND", f"no API route {request.path}{hint}"))
        request.resolver_match = match
        try:
            response = match.func(request, *match.args, **match.kwargs)
            if hasattr(response, "render") and callable(response.render):
                response = response.render()
        except Exception:
            logger.exception("unhandled error on %s %s", request.method, request.path)
            return error_http_response(internal_error())
        return response
