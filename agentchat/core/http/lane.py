"""The API lane: ``/api/`` and HTTP v1's ``/v1/`` requests go straight from ASGI to their DRF
view.

Through Django's ASGI handler every request starts threads of its own, walks the browser
middleware (sessions, CSRF, messages, static files) with a thread hand-off around each sync
one, and opens and closes its own database connection. The token API needs none of that: here
the view runs in one hop on the database pool (``run_db``), whose long-lived threads keep their
SQLite connection. The views, their parsing, authentication and error mapping are the same DRF
code as through Django; only the envelope differs: the request passes the shared
``request_check`` (Host, a single Authorization) like the wait and the websockets, the body is
read whole (chunked or not) and capped while it is read, then handed to the view with its real
length; a few security headers are set and the response's length is declared. While the view
runs the lane listens for the client leaving (``request_abandoned``), for the views whose answer
is a delivery (``answer_is_delivery = True``: a read): one that left commits nothing and is sent
nothing. The API tests go
this way too (``tests/asgi_client.py``: in process, through ``agentchat.asgi.application``).

What the lane skips, so that nothing under ``/api/`` may rely on it:

- **Middleware**, all of ``settings.MIDDLEWARE``: no ``request.session`` and no session user
  (``AuthenticationMiddleware``), no CSRF check (``CsrfViewMiddleware``; harmless while every
  API call authenticates with a bearer token, which a browser does not attach by itself), no
  messages framework, no ``APPEND_SLASH`` redirect (an API path without its slash is a 404
  that says so), no whitenoise, and only the headers in ``SECURITY_HEADERS`` (no HSTS, COOP or
  SSL redirect from ``SecurityMiddleware``).
- **Request signals**: ``request_started``, ``request_finished`` (Django closes old database
  connections on them; here ``run_db`` manages connections) and ``got_request_exception`` (an
  unhandled error is logged here and answered 500 ``INTERNAL_ERROR``; a database that is down
  or full 503 ``DATABASE_UNAVAILABLE`` or 507 ``STORAGE_FULL``, ``agentchat.core.db.faults``);
  and Django's
  ``handler404`` / ``handler500`` (the lane answers those codes itself).

So the dashboard must not serve its session-authenticated pages, forms or JSON
fragments under ``/api/``: there they would find no session, no logged-in user and no CSRF
protection. Its routes go through Django (``agentchat.urls``, outside ``/api/``) with the full
middleware; anything it needs on every request belongs in middleware there, not in a request
signal that the API would skip.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import io
import logging
import threading
from collections.abc import Callable
from typing import Any, cast

from django.conf import settings
from django.core.handlers.asgi import ASGIHandler
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import (
    Resolver404,
    ResolverMatch,
    URLResolver,
    get_resolver,
    set_script_prefix,
)
from django.urls.resolvers import RegexPattern

from agentchat.core.db.faults import database_fault, fault_or_internal
from agentchat.core.db.heavy import heavy_gate, view_heavy_bounded, view_is_heavy, work_budget
from agentchat.core.db.transactions import run_db, run_db_heavy
from agentchat.core.http.asgi_http import (
    SECURITY_HEADERS,
    body_read,
    disconnected,
    error_send,
    request_check,
    scope_headers,
)
from agentchat.core.identity.auth import bearer_from_header
from agentchat.core.identity.services import token_agent, token_agent_cached
from agentchat.core.rules.errors import AppError, ClientGone, error_http_response

logger = logging.getLogger(__name__)


def _with_length(scope: dict[str, Any], length: int) -> dict[str, Any]:
    """The scope with the body's real length: a chunked request has no Content-Length, and
    Django (then DRF) would read its body as empty."""
    headers = [
        (key, value)
        for key, value in scope.get("headers", ())
        if key not in (b"content-length", b"transfer-encoding")
    ]
    headers.append((b"content-length", str(length).encode()))
    return {**scope, "headers": headers}


class ApiLane:
    def __init__(self) -> None:
        # Django's own request and response conversions; its middleware chain is not used.
        self.django = ASGIHandler()
        self.resolve = api_resolver()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            request_check(scope)
            body = await body_read(receive, limit=settings.AGENTCHAT_MAX_REQUEST_BYTES)
        except AppError as exc:
            await error_send(send, exc)
            return
        if body is None:
            return
        set_script_prefix(scope.get("root_path", "") or "/")
        request, error_response = self.django.create_request(
            _with_length(scope, len(body)), io.BytesIO(body)
        )
        if request is None:  # then Django made the error response
            await self.django.send_response(cast(HttpResponseBase, error_response), send)
            return
        try:
            match = self.resolve(request.path_info)
        except Resolver404:
            if request.path_info.startswith("/v1/"):
                hint = (
                    " (HTTP v1 paths end without a slash)"
                    if request.path_info.endswith("/")
                    else ""
                )
            else:
                hint = "" if request.path_info.endswith("/") else " (API paths end with a slash)"
            error = AppError("NOT_FOUND", f"no API route {request.path}{hint}")
            await self.django.send_response(error_http_response(error), send)
            return
        gone = None
        heavy = is_heavy(match, request.method)
        delivery = getattr(getattr(match.func, "cls", None), "answer_is_delivery", False)
        if heavy or delivery:
            # The client leaving: a heavy request still waiting for its turn never runs, and
            # a delivery's view (a read) passes request_abandoned(request) to its service,
            # which then commits nothing.
            abandoned = request.META[ABANDONED] = threading.Event()
            gone = asyncio.ensure_future(disconnected(receive))
            gone.add_done_callback(functools.partial(_client_gone, abandoned))
        try:
            if heavy:
                response = await self._heavy(scope, request, match, gone)
            else:
                response = await run_db(self.get_response, request, match)
        except AppError as exc:
            response = error_http_response(exc)
        except Exception as exc:  # outside the view (the heavy gate's key): a database fault
            fault = database_fault(exc)
            if fault is None:
                raise
            response = error_http_response(fault_or_internal(exc))
        finally:
            if gone is not None:
                gone.cancel()
        if response is None:
            return  # ClientGone: there is no one to answer
        for header, value in SECURITY_HEADERS.items():
            response.headers.setdefault(header, value)
        if not response.streaming and "Content-Length" not in response:
            # Without it the body goes out chunked (as Django's CommonMiddleware would avoid).
            response.headers["Content-Length"] = str(len(response.content))
        await self.django.send_response(response, send)

    async def _heavy(
        self,
        scope: dict[str, Any],
        request: HttpRequest,
        match: ResolverMatch,
        gone: asyncio.Future[None] | None,
    ) -> HttpResponse | None:
        """A heavy request (``agentchat.core.db.heavy``): in its turn at the gate (after its
        agent's previous one), on the heavy pool, within the work budget; None (never run)
        when its client left while it waited."""
        response: HttpResponse | None = await heavy_gate().run(
            await heavy_gate_key(scope),
            lambda: run_db_heavy(self.get_response, request, match, budget=True),
            bounded=view_heavy_bounded(getattr(match.func, "cls", None)),
            gone=gone,
        )
        return response

    def get_response(
        self, request: HttpRequest, match: ResolverMatch, *, budget: bool = False
    ) -> HttpResponse | None:
        request.resolver_match = match
        try:
            if budget:
                with work_budget():
                    response = self._view(request, match)
            else:
                response = self._view(request, match)
        except AppError as exc:
            return error_http_response(exc)  # the budget ran out where the view could not see
        except ClientGone:
            return None
        except Exception as exc:
            error = fault_or_internal(exc)  # the database down or full: a stable 503/507
            if error.code == "INTERNAL_ERROR":
                logger.exception("unhandled error on %s %s", request.method, request.path)
            return error_http_response(error)
        return response

    @staticmethod
    def _view(request: HttpRequest, match: ResolverMatch) -> HttpResponse:
        response: HttpResponse = match.func(request, *match.args, **match.kwargs)
        if hasattr(response, "render") and callable(response.render):
            response = response.render()
        return response


# Resolved paths kept (a channel's name is in most): a hostile client's distinct paths only
# push older ones out; a path that resolves nowhere is never kept, nor one longer than any
# real route (names are at most 64 characters), so the cache holds at most ~4 MB whatever
# requests arrive before authentication.
RESOLVED_KEPT = 4096
RESOLVED_PATH_MAX = 512


def api_resolver() -> Callable[[str], ResolverMatch]:
    """``resolve`` for the lane's paths: the site's resolver walks the dashboard's and the
    admin's routes (and records each miss) before it reaches ``api/v1/``; this one holds only
    the site's routes under ``api/`` and ``v1/`` (the same patterns, so the same match), and
    keeps the last RESOLVED_KEPT matches of paths up to RESOLVED_PATH_MAX characters. Raises
    Resolver404."""
    site = get_resolver()
    api = [
        pattern
        for pattern in site.url_patterns
        if str(pattern.pattern).startswith(("api/", "v1/", "^api/", "^v1/"))
    ]
    resolver = URLResolver(RegexPattern(r"^/"), api)
    kept = functools.lru_cache(maxsize=RESOLVED_KEPT)(resolver.resolve)

    def resolve(path: str) -> ResolverMatch:
        return kept(path) if len(path) <= RESOLVED_PATH_MAX else resolver.resolve(path)

    return resolve


def is_heavy(match: ResolverMatch, method: str | None) -> bool:
    """Whether the view of ``match`` says that ``method`` is heavy (``agentchat.core.db.heavy``):
    ``view_is_heavy``."""
    return view_is_heavy(getattr(match.func, "cls", None), method)


async def heavy_gate_key(scope: dict[str, Any]) -> bytes:
    """The heavy gate's key of a request: its agent (``a<id>``), whichever of the agent's tokens
    it carries, as ``token_agents`` knows it (authentication fills it) or else one indexed
    select on the short pool; a token that names no agent (unknown or revoked: its view refuses
    it) keys by a digest of itself as authentication parses it (``Bearer t``, ``bearer t`` and
    ``Bearer  t`` are one token), an unparsable header by a digest of its raw value."""
    values = scope_headers(scope, b"authorization")  # request_check refused more than one
    raw = values[0] if values else None
    try:
        token = bearer_from_header(raw)
    except AppError:
        token = None
    if token is None:
        return b"" if raw is None else b"h" + _digest(raw)
    agent_id = token_agent_cached(token)
    if agent_id is None:
        agent_id = await run_db(token_agent, token)
    return b"t" + _digest(token) if agent_id is None else b"a%d" % agent_id


def _digest(value: str) -> bytes:
    return hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _client_gone(abandoned: threading.Event, watch: asyncio.Future[None]) -> None:
    if watch.cancelled():
        return  # the view answered first
    watch.exception()  # retrieved: a receive that failed counts as a client gone
    abandoned.set()


# request.META's key of the lane's threading.Event that is set once the client has gone.
ABANDONED = "agentchat.abandoned"


def request_abandoned(request: HttpRequest) -> threading.Event | None:
    """Set once the client of ``request`` has gone (None outside the lane): give it to a
    service that delivers, so that its move commits only while someone is there to answer."""
    return request.META.get(ABANDONED)
