"""Authentication and origin checks for ASGI endpoints, which bypass DRF."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from django.conf import settings
from django.http.request import validate_host

from agentchat.core.db.heavy import person_key
from agentchat.core.http.asgi_http import scope_headers, scope_host
from agentchat.core.identity.auth import bearer_from_header
from agentchat.core.identity.services import ACTING_HEADER, token_authenticate
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError


def _first(values: list[str]) -> str | None:
    return values[0] if values else None


def scope_query(scope: dict[str, Any]) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("utf-8", "replace")
    return {key: values[-1] for key, values in parse_qs(raw, keep_blank_values=True).items()}


def origin_allowed(origin: str) -> bool:
    try:
        parsed = urlparse(origin)
        host = parsed.hostname
    except ValueError:  # e.g. "http://[::1": a malformed header is refused, not a traceback
        return False
    if parsed.scheme not in {"http", "https"} or not host:
        return False
    return validate_host(host, settings.ALLOWED_HOSTS) or validate_host(
        f"[{host}]", settings.ALLOWED_HOSTS
    )


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _scheme_host_port(scheme: str, netloc: str) -> tuple[str, str, int | None] | None:
    try:
        parsed = urlparse(f"{scheme}://{netloc}")
        port = parsed.port
    except ValueError:
        return None
    if parsed.hostname is None:
        return None
    return scheme, parsed.hostname.lower(), port or _DEFAULT_PORTS.get(scheme)


def origin_is_site(scope: dict[str, Any], origin: str) -> bool:
    """Whether ``origin`` is the site itself: the same scheme, host and port as the request
    (its Host header), as a browser page of this server sends, or one of CSRF_TRUSTED_ORIGINS
    (behind a TLS-terminating proxy the request arrives as ``ws``/``http`` while the page's
    origin is ``https``: list it there, as Django's CSRF check needs anyway). Another port of the
    same host is another site (a local dev server at :3000 is not the admin at :8000)."""
    try:
        parsed = urlparse(origin)
        if parsed.scheme not in _DEFAULT_PORTS or parsed.path not in ("", "/"):
            return False
        theirs = _scheme_host_port(parsed.scheme, parsed.netloc)
    except ValueError:
        return False
    if theirs is not None and theirs in _trusted_origins():
        return True
    secure = scope.get("scheme") in {"wss", "https"}
    host = scope_host(scope)
    ours = None if host is None else _scheme_host_port("https" if secure else "http", host)
    return theirs is not None and theirs == ours


def _trusted_origins() -> set[tuple[str, str, int | None]]:
    trusted = set()
    for entry in settings.CSRF_TRUSTED_ORIGINS:
        scheme, _, netloc = entry.partition("://")
        if scheme in _DEFAULT_PORTS and "*" not in netloc:
            parsed = _scheme_host_port(scheme, netloc)
            if parsed is not None:
                trusted.add(parsed)
    return trusted


def scope_token(scope: dict[str, Any], *, allow_query: bool) -> str | None:
    raw = bearer_from_header(_first(scope_headers(scope, b"authorization")))
    if raw is None and allow_query:
        raw = scope_query(scope).get("token") or None
    return raw


def scope_acting(scope: dict[str, Any]) -> str | None:
    """The AgentChat-As header's value (``request_check`` refused several), or None."""
    return _first(scope_headers(scope, b"agentchat-as"))


def websocket_principal(scope: dict[str, Any]) -> tuple[str, int | None, bytes]:
    """Who may subscribe: a token's agent, or a signed-in browser user (session) on a page of
    this very site. A present Origin must match ALLOWED_HOSTS; a missing one needs a token
    (agents' websocket clients send none); a session needs the Origin of the site itself
    (scheme, host and port of the request). With a token, an AgentChat-As header names the
    sub-agent it acts as. Returns the principal's name and the token's id (None for a
    session). Raises FORBIDDEN, AUTH_REQUIRED, AUTH_INVALID, INVALID_NAME,
    ACTING_AS_FORBIDDEN, SUBAGENTS_TOO_MANY. Also returns the connection's key at the heavy
    gate and in the count of live connections: the token's agent (``a<id>``, as the API lane's
    ``heavy_gate_key``, whichever sub-agent it acts as), or the signed-in person
    (``person_key``). Sync: run in run_db."""
    origin = _first(scope_headers(scope, b"origin"))
    if origin is not None and not origin_allowed(origin):
        raise AppError("FORBIDDEN", f"origin {origin!r} is not allowed")
    raw = scope_token(scope, allow_query=True)
    acting = scope_acting(scope)
    if raw is not None:
        agent, token = token_authenticate(raw, acting=acting)
        return agent.name, token.pk, b"a%d" % token.agent_id
    user = scope.get("user")
    if user is not None and user.is_authenticated:
        if acting is not None:
            raise AppError(
                "ACTING_AS_FORBIDDEN", f"{ACTING_HEADER} acts for a token, not a browser session"
            )
        if origin is None or not origin_is_site(scope, origin):
            raise AppError("FORBIDDEN", "a signed-in browser must connect from this site's origin")
        linked = Agent.objects.filter(user=user).first()
        if linked is not None:
            return linked.name, None, person_key(user.pk)
        if user.is_staff:
            return f"user:{user.get_username()}", None, person_key(user.pk)
    raise AppError("AUTH_REQUIRED", "send a bearer token (header or ?token=) or sign in")
