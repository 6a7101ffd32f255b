"""A small synchronous HTTP client of the REST API (``/api/v1/``).

``Client(url, token).request(method, path, json=..., params=...)`` returns the answer's JSON
body (or its text, when another type is asked for, such as ``state/`` as Markdown) or raises
``ClientError`` with the server's stable code, message and detail; what goes wrong before an
answer (no server, a dropped connection, a timeout) is a ``ClientError`` of the client's own
codes, with a one-line hint of what to do.

Every call has a deadline for the whole of it (``call_timeout`` seconds, default
``CALL_TIMEOUT``; ``--call-timeout``, ``$AGENT_CHAT_CALL_TIMEOUT`` or ``call_timeout`` in the
config file): httpx's timeouts bound each read, so a server dripping its answer a byte at a
time would hold a call for ever. Each socket read and write of a call waits at most what is
left of it (``_DeadlineBackend``), and a call past it is ``SERVER_TIMEOUT``. The answer is
read as a stream and refused (``RESPONSE_TOO_LARGE``) past ``MAX_ANSWER_BYTES``, so an endless
one neither fills the memory nor keeps the call past its deadline.

A heavy request (a peek, a list, the state) refused 429 ``HEAVY_REQUEST_BUSY`` (this agent's
other heavy requests fill the server's queue; nothing was run) is tried again with a capped
backoff (``agentchat.client.backoff``) within that deadline; past it the error is raised,
``transient``. A 503 ``WORK_BUDGET_EXCEEDED`` is not transient: the same request would run
out of its budget again.
"""

from __future__ import annotations

import contextvars
import json as jsonlib
import time
import uuid
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

import httpcore
import httpx

from agentchat.client import shapes
from agentchat.client.backoff import Backoff
from agentchat.client.config import CALL_TIMEOUT, Config
from agentchat.client.errors import ClientError, one_line

API_ROOT = "/api/v1/"
# The header that names the sub-agent a token acts as (the server's identity.ACTING_HEADER).
ACTING_HEADER = "AgentChat-As"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0
# The most bytes one answer may have: far above any real one (a page of messages is at most
# the server's AGENTCHAT_READ_MAX_BYTES, 1 MiB by default; a state summary or a list page is
# smaller), so a server streaming without end is refused before it fills the memory.
MAX_ANSWER_BYTES = 64 * 1024 * 1024
# The monotonic time by which the call this thread is making must be over (None: no call).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "agentchat_call_deadline", default=None
)
TOKEN_HINT = (
    "make a token on the server (`.venv/bin/python manage.py create_agent_token NAME`), "
    "then pass --token or set AGENT_CHAT_TOKEN"
)
# The server's answer (429) to a heavy request while this agent's others fill its queue.
BUSY = "HEAVY_REQUEST_BUSY"
CHANNEL_HINT = "list channels with `agentchat channels`, create one with `agentchat init NAME`"


def message_id() -> str:
    """An id of the client's own for a post, in the form of the ids the server makes: a post
    sent again (``Client.request(retry=True)``) after a dropped connection or a 502/503 (a
    server process stopped in a deploy roll) is stored once, answered with the first."""
    return f"msg_{uuid.uuid4().hex}"


def seg(value: str) -> str:
    """One path segment, percent-encoded (a channel name, a task id, a marker). Raises
    ``INVALID_TEXT`` for a value no UTF-8 can carry (a lone surrogate: an argument of bytes
    that are not UTF-8, a JSON ``\\ud800`` escape)."""
    return quote(_utf8(value), safe="")


def _utf8(value: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ClientError(
            "INVALID_TEXT", "an argument is not valid Unicode text (a lone surrogate?)"
        ) from exc
    return value


def _left(timeout: float | None) -> float | None:
    """The socket timeout of one read or write: ``timeout``, cut to what is left of the
    call's deadline; ``ReadTimeout`` once it has passed."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the call's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    """A connection whose every read and write waits at most what is left of the call."""

    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    """The sync network backend with every connection a ``_DeadlineStream``."""

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        return _DeadlineStream(
            super().connect_tcp(host, port, _left(timeout), local_address, socket_options)
        )


def _deadline_transport() -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport()
    # httpx takes no network backend of its own; its pool (httpcore's) does.
    pool = transport._pool
    if not isinstance(pool, httpcore.ConnectionPool):  # pragma: no cover - httpx changed
        raise RuntimeError("httpx's transport has no httpcore connection pool")
    pool._network_backend = _DeadlineBackend()
    return transport


class Client:
    """One server, one token; a connection pool reused by every request (close it, or use
    ``with``). Each request is over within ``call_timeout`` seconds, or ``SERVER_TIMEOUT``."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        url_source: str = "",
        transport: httpx.BaseTransport | None = None,
        call_timeout: float = CALL_TIMEOUT,
        acting: str | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        # The sub-agent of the token's agent that every request acts as (the AgentChat-As
        # header, docs/signals.md); None: the token's agent.
        self.acting = acting
        self.url_source = url_source
        self.call_timeout = call_timeout
        self.max_answer = MAX_ANSWER_BYTES
        # A monotonic time every call must also be over by (a run of calls with one deadline,
        # such as the git guard's check); None: each call has its own only.
        self.until: float | None = None
        headers = {"Accept": "application/json", "User-Agent": "agentchat-cli"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        headers.update(self.identity_headers())
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT),
            transport=transport if transport is not None else _deadline_transport(),
            follow_redirects=False,
            trust_env=False,
        )

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> Client:
        kwargs.setdefault("call_timeout", config.call_timeout)
        return cls(config.url, config.token, url_source=config.sources.get("url", ""), **kwargs)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def identity_headers(self) -> dict[str, str]:
        """The header naming the sub-agent the client acts as, if any (HTTP and websockets)."""
        return {ACTING_HEADER: self.acting} if self.acting else {}

    def ws_url(self, path: str) -> str:
        """The websocket URL of a path under the server root (``/ws/channels/x/``)."""
        base = "ws" + self.url[len("http") :]
        return base + path

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        accept: str = "application/json",
        timeout: float | None = None,
        raw: bool = False,
        expect: Any = None,
        retry: bool = False,
    ) -> Any:
        """Send one request; ``path`` is under ``/api/v1/`` unless it starts with ``/``.

        Returns the JSON body (None for an empty one) or, when ``raw`` is set or ``accept``
        asks for another type, its text as the server sent it. ``expect`` is the shape the
        body must have (``agentchat.client.shapes``; checked on the parsed body when ``raw``
        too). The whole call is over within ``timeout`` seconds (default: the client's
        ``call_timeout``). Raises ``ClientError``: the server's code for an error body,
        ``BAD_RESPONSE`` for an answer that is no AgentChat body (a redirect, which is not
        followed; a non-JSON answer where JSON is asked for; JSON of another shape than
        ``expect``), ``SERVER_UNREACHABLE`` / ``SERVER_TIMEOUT`` (``transient``) when no
        answer came in time, ``INVALID_TEXT`` for an argument that is not valid text (it is
        never sent).

        ``retry``: what is transient but the deadline (a connection refused or dropped, a 502
        or 504 of a proxy whose server went away, a 503) is sent again with the backoff while
        the call has time left: for a request that is idempotent, such as a post with its
        ``id`` (a deploy roll loses and doubles nothing)."""
        full = path if path.startswith("/") else API_ROOT + path
        content = None
        headers = {"Accept": accept}
        if json is not None:
            try:
                content = jsonlib.dumps(json, ensure_ascii=False).encode("utf-8")
            except UnicodeEncodeError as exc:
                raise ClientError(
                    "INVALID_TEXT", "an argument is not valid Unicode text (a lone surrogate?)"
                ) from exc
            headers["Content-Type"] = "application/json"
        clean_params = {k: _param(v) for k, v in (params or {}).items() if v is not None}
        total = self.call_timeout if timeout is None else timeout
        if self.until is not None:
            total = min(total, max(0.0, self.until - time.monotonic()))
        deadline = time.monotonic() + total
        backoff = Backoff(deadline)
        while True:
            try:
                response = self._send(method, full, content, clean_params, headers, total, deadline)
                body = self._answer(response, raw, accept)
                break
            except ClientError as error:
                # A heavy request refused because this agent's others fill the server's queue
                # was not run at all: retried, with the backoff, while the call has time left
                # for another try.
                busy = error.status == 429 and error.code == BUSY
                again = retry and error.transient and error.code != "SERVER_TIMEOUT"
                if not (busy or again) or deadline - time.monotonic() <= backoff.delay:
                    raise
                backoff.sleep()
        if expect is not None:
            parsed = body
            if raw and isinstance(body, str):
                try:
                    parsed = jsonlib.loads(body)
                except ValueError as exc:
                    raise ClientError(
                        "BAD_RESPONSE", f"the server at {self.url} answered malformed JSON"
                    ) from exc
            shapes.check(parsed, expect, f"{method} {full}")
        return body

    def _send(
        self,
        method: str,
        full: str,
        content: bytes | None,
        params: dict[str, str],
        headers: dict[str, str],
        total: float,
        deadline: float,
    ) -> httpx.Response:
        """One try of a call of ``total`` seconds that must be over by ``deadline``."""
        started = time.monotonic()
        left = max(0.0, deadline - started)
        token = _DEADLINE.set(deadline)
        try:
            response = self._http.send(
                self._http.build_request(
                    method,
                    full,
                    content=content,
                    params=params,
                    headers=headers,
                    timeout=httpx.Timeout(min(READ_TIMEOUT, left), connect=CONNECT_TIMEOUT),
                ),
                stream=True,
            )
            try:
                _read_capped(response, self.max_answer, f"{method} {full}", self.url)
            finally:
                response.close()
            return response
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout) and time.monotonic() - started < left:
                raise self._unreachable("connection timed out") from exc
            raise ClientError(
                "SERVER_TIMEOUT",
                f"the server at {self.url} did not answer {method} {full} within {total:g} s "
                "(the call's deadline: --call-timeout, $AGENT_CHAT_CALL_TIMEOUT)",
                transient=True,
            ) from exc
        except httpx.ConnectError as exc:
            raise self._unreachable(_reason(exc)) from exc
        except (httpx.TransportError, UnicodeError) as exc:
            raise ClientError(
                "SERVER_UNREACHABLE",
                f"the connection to {self.url} failed during {method} {full}: {_reason(exc)}",
                transient=True,
            ) from exc
        finally:
            _DEADLINE.reset(token)

    def _unreachable(self, reason: str) -> ClientError:
        where = f"; the URL came from {self.url_source}" if self.url_source else ""
        return ClientError(
            "SERVER_UNREACHABLE",
            f"cannot reach the AgentChat server at {self.url} ({reason}{where}): start it "
            "(`make run` in its checkout) or point --url / AGENT_CHAT_URL at a running one",
            transient=True,
        )

    def _answer(self, response: httpx.Response, raw: bool, accept: str) -> Any:
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        is_json = kind == "application/json" or kind.endswith("+json")
        status = response.status_code
        if status >= 400:
            raise self._error(response, is_json)
        if 300 <= status < 400:
            # Redirects are not followed (a token must not travel to another host): an
            # answer of the API is never one, so the URL is not the server's root.
            where = one_line(response.headers.get("location", ""))[:200]
            raise ClientError(
                "BAD_RESPONSE",
                f"the server at {self.url} answered HTTP {status} (a redirect"
                + (f" to {where}" if where else "")
                + "): is the URL the AgentChat server's root?",
                status=status,
            )
        if not response.content:
            return None
        if not is_json and _wants_json(accept):
            raise ClientError(
                "BAD_RESPONSE",
                f"the server at {self.url} answered HTTP {status} with "
                f"{one_line(kind)[:100] or 'no content type'}, not JSON (is the URL the "
                "AgentChat server's root?)",
                status=status,
            )
        if raw or not is_json:
            return response.text
        try:
            return jsonlib.loads(response.content)
        except ValueError as exc:
            raise ClientError(
                "BAD_RESPONSE", f"the server at {self.url} answered malformed JSON"
            ) from exc

    def _error(self, response: httpx.Response, is_json: bool) -> ClientError:
        status = response.status_code
        error = None
        if is_json:
            try:
                error = jsonlib.loads(response.content).get("error")
            except (ValueError, AttributeError):
                error = None
        if not (
            isinstance(error, dict)
            and isinstance(error.get("code"), str)
            and isinstance(error.get("message"), str)
        ):
            return ClientError(
                "BAD_RESPONSE",
                f"the server at {self.url} answered HTTP {status} without an AgentChat error "
                "body (is the URL the AgentChat server's root?)",
                status=status,
                transient=status in (502, 503, 504),
            )
        code, message = error["code"], error["message"]
        detail = error.get("detail") if isinstance(error.get("detail"), dict) else {}
        if code in ("AUTH_REQUIRED", "AUTH_INVALID"):
            message = f"{message}: {TOKEN_HINT}"
        elif code == "CHANNEL_NOT_FOUND":
            message = f"{message} ({CHANNEL_HINT})"
        # 503 is the server unable to take the request now, but for a heavy request that ran
        # out of its work budget: the same request would run out again.
        transient = (status == 503 and code != "WORK_BUDGET_EXCEEDED") or (
            status == 429 and code == BUSY
        )
        return ClientError(code, message, detail, status=status, transient=transient)

    # --- HTTP v1 direct messages (/v1/, docs/http-v1.md) -----------------------------------
    # Each call is under /v1/agents/<the token's agent>/ (learned once from GET /api/v1/me/):
    # a path there takes its own agent's token only.

    def v1_agent(self) -> str:
        """The token's agent (the one acted as, with ``acting``), asked once and kept."""
        known: str | None = getattr(self, "_v1_agent_name", None)
        if known is None:
            known = str(self.request("GET", "me/", expect=shapes.ME)["name"])
            self._v1_agent_name = known
        return known

    def v1_path(self, rest: str) -> str:
        """``/v1/agents/<the token's agent>/<rest>``."""
        return f"/v1/agents/{seg(self.v1_agent())}/{rest}"

    def v1_send(
        self,
        to: str,
        text: str | None,
        *,
        envelope_id: str | None = None,
        conversation_id: str | None = None,
        correlation_id: str | None = None,
        data: Any = None,
        content_type: str | None = None,
        metadata: Mapping[str, str] | None = None,
        raw: bool = False,
    ) -> Any:
        """``POST /v1/agents/<me>/messages``: the stored envelope (a retry of ``envelope_id``
        with the same content answers the stored one). Omitted fields are not sent."""
        body: dict[str, Any] = {"to": to}
        optional = {
            "id": envelope_id,
            "conversation_id": conversation_id,
            "correlation_id": correlation_id,
            "text": text,
            "data": data,
            "content_type": content_type,
            "metadata": dict(metadata) if metadata else None,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        return self.request(
            "POST", self.v1_path("messages"), json=body, raw=raw, expect=shapes.ENVELOPE
        )

    def v1_inbox(self, cursor: int | None = None, limit: int | None = None) -> Any:
        """``GET /v1/agents/<me>/inbox``: ``{deliveries, next_cursor, tail}`` from ``cursor``."""
        return self.request(
            "GET",
            self.v1_path("inbox"),
            params={"cursor": cursor, "limit": limit},
            expect=shapes.INBOX,
        )

    def v1_receipt(
        self,
        message_id: str,
        status: str,
        *,
        to: str | None = None,
        detail: str | None = None,
        conversation_id: str | None = None,
        envelope_id: str | None = None,
        raw: bool = False,
    ) -> Any:
        """``POST /v1/agents/<me>/receipts``: the receipt's envelope (kind ``receipt``)."""
        body: dict[str, Any] = {"message_id": message_id, "status": status}
        optional = {
            "to": to,
            "detail": detail,
            "conversation_id": conversation_id,
            "id": envelope_id,
        }
        body.update({key: value for key, value in optional.items() if value is not None})
        return self.request(
            "POST", self.v1_path("receipts"), json=body, raw=raw, expect=shapes.ENVELOPE
        )

    def v1_contacts(self, *, after: str | None = None, limit: int | None = None) -> Any:
        """One page of the address book's cards (``contacts``, ``more``, ``next``)."""
        return self.request(
            "GET",
            self.v1_path("contacts"),
            params={"after": after, "limit": limit},
            expect=shapes.CONTACTS,
        )

    def v1_contact_put(self, card: Mapping[str, Any], *, raw: bool = False) -> Any:
        """``PUT /v1/agents/<me>/contacts/<card id>``: the card as stored."""
        contact_id = card.get("id")
        if not isinstance(contact_id, str) or not contact_id:
            raise ClientError("USAGE", "a contact card needs an `id` (the contact's agent id)")
        return self.request(
            "PUT",
            self.v1_path(f"contacts/{seg(contact_id)}"),
            json=dict(card),
            raw=raw,
            expect=shapes.CONTACT_CARD,
        )

    def v1_contact_share(
        self, to: str, contact_id: str, *, conversation_id: str | None = None, raw: bool = False
    ) -> Any:
        """``POST /v1/agents/<me>/contact-shares``: the ``contact.share`` envelope sent."""
        body: dict[str, Any] = {"to": to, "contact_id": contact_id}
        if conversation_id is not None:
            body["conversation_id"] = conversation_id
        return self.request(
            "POST", self.v1_path("contact-shares"), json=body, raw=raw, expect=shapes.ENVELOPE
        )

    def v1_contact_accept(self, message_id: str, *, raw: bool = False) -> Any:
        """``POST /v1/agents/<me>/contact-shares/<message_id>/accept``: the ``contact.upsert``
        event (the first acceptance's, for a share accepted before)."""
        return self.request(
            "POST",
            self.v1_path(f"contact-shares/{seg(message_id)}/accept"),
            json={},
            raw=raw,
            expect=shapes.CONTACT_EVENT,
        )


def _read_capped(response: httpx.Response, cap: int, what: str, url: str) -> None:
    """Read the body of a streamed ``response`` into it (``response.content``), chunk by
    chunk, each socket read within the call's deadline; ``RESPONSE_TOO_LARGE`` as soon as it
    passes ``cap`` bytes (the rest is never read)."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        size += len(chunk)
        if size > cap:
            raise ClientError(
                "RESPONSE_TOO_LARGE",
                f"the server at {url} answered {what} with more than {cap} bytes "
                "(no AgentChat answer is so large); the rest was not read",
                status=response.status_code,
            )
        chunks.append(chunk)
    # The body read is the response's own (what .read() would have set), one copy only.
    response._content = b"".join(chunks)
    chunks.clear()


def _wants_json(accept: str) -> bool:
    """Whether an ``Accept`` header asks for JSON only (then any other answer is wrong)."""
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds) and all(k == "application/json" or k.endswith("+json") for k in kinds)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return _utf8(str(value))


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text
