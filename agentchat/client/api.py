"""A small synchronous HTTP client of the REST API (``/api/v1/``).

``Client(url, token).request(method, path, json=..., params=...)`` returns the answer's JSON
body (or its text, when another type is asked for, such as ``state/`` as Markdown) or raises
``ClientError`` with the server's stable code, message and detail; what goes wrong before an
answer (no server, a dropped connection, a timeout) is a ``ClientError`` of the client's own
codes, with a one-line hint of what to do.
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from agentchat.client.config import Config
from agentchat.client.errors import ClientError, one_line

API_ROOT = "/api/v1/"
CONNECT_TIMEOUT = 5.0
READ_TIMEOUT = 60.0
TOKEN_HINT = (
    "make a token on the server (`.venv/bin/python manage.py create_agent_token NAME`), "
    "then pass --token or set AGENT_CHAT_TOKEN"
)
CHANNEL_HINT = "list channels with `agentchat channels`, create one with `agentchat init NAME`"


def seg(value: str) -> str:
    """One path segment, percent-encoded (a channel name, a task id, a marker)."""
    return quote(value, safe="")


class Client:
    """One server, one token; a connection pool reused by every request (close it, or use
    ``with``)."""

    def __init__(
        self,
        url: str,
        token: str | None,
        *,
        url_source: str = "",
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.url_source = url_source
        headers = {"Accept": "application/json", "User-Agent": "agentchat-cli"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT),
            transport=transport,
            follow_redirects=False,
            trust_env=False,
        )

    @classmethod
    def from_config(cls, config: Config, **kwargs: Any) -> Client:
        return cls(config.url, config.token, url_source=config.sources.get("url", ""), **kwargs)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

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
    ) -> Any:
        """Send one request; ``path`` is under ``/api/v1/`` unless it starts with ``/``.

        Returns the JSON body (None for an empty one) or, when ``raw`` is set or ``accept``
        asks for another type, its text as the server sent it. Raises ``ClientError``: the
        server's code for an error body, ``BAD_RESPONSE`` for an answer that is no AgentChat
        body (a redirect, which is not followed; a non-JSON answer where JSON is asked for),
        ``SERVER_UNREACHABLE`` / ``SERVER_TIMEOUT`` (``transient``) when no answer came,
        ``INVALID_TEXT`` for an argument that is not valid text (it is never sent)."""
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
        try:
            response = self._http.request(
                method,
                full,
                content=content,
                params=clean_params,
                headers=headers,
                timeout=(
                    None if timeout is None else httpx.Timeout(timeout, connect=CONNECT_TIMEOUT)
                ),
            )
        except httpx.TimeoutException as exc:
            if isinstance(exc, httpx.ConnectTimeout):
                raise self._unreachable("connection timed out") from exc
            raise ClientError(
                "SERVER_TIMEOUT",
                f"the server at {self.url} did not answer {method} {full} in time",
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
        return self._answer(response, raw, accept)

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
        return ClientError(code, message, detail, status=status, transient=status == 503)


def _wants_json(accept: str) -> bool:
    """Whether an ``Accept`` header asks for JSON only (then any other answer is wrong)."""
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return bool(kinds) and all(k == "application/json" or k.endswith("+json") for k in kinds)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _reason(exc: Exception) -> str:
    text = str(exc) or type(exc).__name__
    if "Connection refused" in text or "Errno 111" in text:
        return "connection refused"
    return text
