"""An ``APIClient`` whose requests go through the real ASGI application, in process.

Production ``/api/`` traffic goes from daphne to ``agentchat.asgi.application``: the wait
endpoint, or the API lane (``agentchat/core/http/lane.py``), which skips Django's middleware and
request signals. DRF's own ``APIClient`` calls the views through Django's handler instead, the
route no client takes. ``AsgiApiClient`` keeps ``APIClient``'s interface (``get``, ``post(...,
format="json")``, ``generic``, ``credentials``, ``response.json()``…), so the tests keep their
shape, but turns each request into an ASGI ``http`` scope and its body, runs the application
on an event loop in a thread of its own, and turns what the application sends back into a
response.

The database: the lane and the live endpoints run their ORM work through
``agentchat.core.db.transactions.run_db`` on a pool of long-lived threads, each with its own
connection, which would neither see the uncommitted rows of a test under the ``db`` fixture (one
transaction rolled back at the end) nor, on SQLite, get past that transaction's lock. So the client
sets ``db.inline_executor`` in the context of the request: ``run_db`` hands the request's work to an
executor whose queue the test's own thread drains while it waits for the response. The views run in
the test's thread, on its connection, inside its transaction — as with ``APIClient`` — while
everything around them (reading the body, routing, the live endpoints, the hand-back of pushes) runs
on an event loop, as in production. The context variable is seen only by this request's tasks; other
event loops (a test's own endpoints) keep the pool.

An exception the application logs (the lane answers 500 ``INTERNAL_ERROR``) is raised in the
test instead, as Django's test client does; ``raise_request_exception=False`` gives the 500.
Only ``/api/`` paths: the admin and the pages go through Django with its middleware in
production too, and their tests use Django's test client.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import Any
from urllib.parse import quote

from django.core.handlers.wsgi import WSGIRequest
from django.http import HttpResponse
from rest_framework.test import APIClient

from agentchat.core.db import transactions as db

REQUEST_TIMEOUT = 120.0  # a request that hangs fails the test instead of the suite


class InlineExecutor(Executor):
    """Runs submitted work in the thread that calls ``work_until_closed`` (the test's)."""

    _CLOSED = object()

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self._queue.put((future, fn, args, kwargs))
        return future

    def close(self) -> None:
        self._queue.put(self._CLOSED)

    def work_until_closed(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                item = self._queue.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                raise TimeoutError(f"the request did not finish in {timeout:g} s") from None
            if item is self._CLOSED:
                return
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                result = fn(*args, **kwargs)
            except BaseException as exc:
                future.set_exception(exc)
            else:
                future.set_result(result)


def scope_from_environ(environ: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The ASGI scope and body daphne would hand the application for this WSGI environ."""
    # WSGI spells the path as latin-1 characters of its bytes (Django's RequestFactory unquotes
    # it); daphne unquotes the raw path and decodes it as UTF-8, replacing what is not.
    raw = environ["PATH_INFO"].encode("iso-8859-1")
    headers: list[tuple[bytes, bytes]] = []
    for key, value in environ.items():
        if key.startswith("HTTP_"):
            name = key[5:]
        elif key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            name = key
        else:
            continue
        if key == "HTTP_COOKIE" and not value:
            continue
        headers.append((name.replace("_", "-").lower().encode(), str(value).encode("latin-1")))
    server_name = environ.get("SERVER_NAME", "testserver")
    server_port = int(environ.get("SERVER_PORT", "80"))
    if "HTTP_HOST" not in environ:  # every HTTP/1.1 client sends one
        host = server_name if server_port in (80, 443) else f"{server_name}:{server_port}"
        headers.append((b"host", host.encode("latin-1")))
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length) if length else b""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": environ["REQUEST_METHOD"].upper(),
        "scheme": environ.get("wsgi.url_scheme", "http"),
        "path": raw.decode("utf-8", errors="replace"),
        "raw_path": quote(raw, safe="/:@!$&'()*+,;=-._~").encode("ascii"),
        "root_path": "",
        "query_string": environ.get("QUERY_STRING", "").encode("iso-8859-1"),
        "headers": headers,
        "client": (environ.get("REMOTE_ADDR", "127.0.0.1"), 0),
        "server": (server_name, server_port),
    }
    return scope, body


def exchange(app: Any, scope: dict[str, Any], body: bytes) -> list[dict[str, Any]]:
    """Run one request through ``app``; the ASGI messages it sent. Database work submitted
    through ``run_db`` runs in the calling thread meanwhile."""
    inline = InlineExecutor()
    sent: list[dict[str, Any]] = []
    failure: list[BaseException] = []

    async def serve() -> None:
        answered = asyncio.Event()
        body_given = False

        async def receive() -> dict[str, Any]:
            nonlocal body_given
            if not body_given:
                body_given = True
                return {"type": "http.request", "body": body, "more_body": False}
            await answered.wait()  # the client stays until it has its answer
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                answered.set()

        await asyncio.wait_for(app(scope, receive, send), REQUEST_TIMEOUT)

    def run_loop() -> None:
        token = db.inline_executor.set(inline)  # asyncio.run's task copies this context
        try:
            asyncio.run(serve())
        except BaseException as exc:
            failure.append(exc)
        finally:
            db.inline_executor.reset(token)
            inline.close()

    thread = threading.Thread(target=run_loop, name="asgi-test-client", daemon=True)
    thread.start()
    inline.work_until_closed(REQUEST_TIMEOUT + 10)
    thread.join(10)
    if failure:
        raise failure[0]
    return sent


def response_from(sent: list[dict[str, Any]]) -> HttpResponse:
    starts = [m for m in sent if m["type"] == "http.response.start"]
    assert len(starts) == 1, f"the application sent {len(starts)} response starts: {sent!r}"
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    response = HttpResponse(content, status=starts[0]["status"])
    del response.headers["Content-Type"]
    for raw_name, raw_value in starts[0].get("headers", []):
        name, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        if name.lower() == "set-cookie":
            response.cookies.load(value)
        elif name in response.headers:
            response.headers[name] += f", {value}"
        else:
            response.headers[name] = value
    return response


class _Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.exceptions: list[BaseException] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.exc_info and record.exc_info[1] is not None:
            self.exceptions.append(record.exc_info[1])


class AsgiClientHandler:
    def __init__(self, client: AsgiApiClient) -> None:
        self.client = client

    def __call__(self, environ: dict[str, Any]) -> HttpResponse:
        from agentchat.asgi import application

        scope, body = scope_from_environ(environ)
        if not scope["path"].startswith(("/api/", "/v1/")):
            raise AssertionError(
                f"{scope['path']}: AsgiApiClient is for /api/ and /v1/; pages and the admin go "
                "through Django in production too: use Django's test client (client, "
                "admin_client)"
            )
        logged = _Logged()
        root = logging.getLogger()
        root.addHandler(logged)
        try:
            sent = exchange(application, scope, body)
        finally:
            root.removeHandler(logged)
        if logged.exceptions and self.client.raise_request_exception:
            raise logged.exceptions[0]
        response = response_from(sent)
        response.wsgi_request = WSGIRequest(environ)  # Django's client reads its urlconf
        response.asgi_scope = scope
        return response


class AsgiApiClient(APIClient):
    """``APIClient`` through ``agentchat.asgi.application`` (module docstring)."""

    def __init__(self, **defaults: Any) -> None:
        super().__init__(**defaults)
        self.handler = AsgiClientHandler(self)

    def force_authenticate(self, user: Any = None, token: Any = None) -> None:
        raise NotImplementedError(
            "the API authenticates by token on every surface: "
            "credentials(HTTP_AUTHORIZATION=f'Bearer {token}')"
        )
