"""Authentication and origin checks for ASGI consumers, which bypass DRF."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from django.conf import settings
from django.http.request import validate_host

from agentchat.core.auth import bearer_from_header
from agentchat.core.errors import AppError
from agentchat.core.models import Agent
from agentchat.core.services import token_authenticate


def scope_header(scope: dict[str, Any], name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def scope_query(scope: dict[str, Any]) -> dict[str, str]:
    raw = scope.get("query_string", b"").decode("utf-8", "replace")
    return {key: values[-1] for key, values in parse_qs(raw, keep_blank_values=True).items()}


def origin_allowed(origin: str) -> bool:
    parsed = urlparse(origin)
    host = parsed.hostname
    if parsed.scheme not in {"http", "https"} or not host:
        return False
    return validate_host(host, settings.ALLOWED_HOSTS) or validate_host(
        f"[{host}]", settings.ALLOWED_HOSTS
    )


def scope_token(scope: dict[str, Any], *, allow_query: bool) -> str | None:
    raw = bearer_from_header(scope_header(scope, b"authorization"))
    if raw is None and allow_query:
        raw = scope_query(scope).get("token") or None
    return raw


def scope_agent(scope: dict[str, Any], *, allow_query: bool = False) -> Agent:
    """The agent of a bearer token. Raises AUTH_REQUIRED / AUTH_INVALID (sync: run in db_call)."""
    agent, _ = token_authenticate(scope_token(scope, allow_query=allow_query))
    return agent


def websocket_principal(scope: dict[str, Any]) -> str:
    """Who may subscribe: a token's agent, or a signed-in browser user (session) whose Origin
    matches. A present Origin must match ALLOWED_HOSTS; a missing one needs a token (agents'
    websocket clients send none). Returns the principal's name. Sync: run in db_call."""
    origin = scope_header(scope, b"origin")
    if origin is not None and not origin_allowed(origin):
        raise AppError("FORBIDDEN", f"origin {origin!r} is not allowed")
    raw = scope_token(scope, allow_query=True)
    if raw is not None:
        agent, _ = token_authenticate(raw)
        return agent.name
    user = scope.get("user")
    if origin is not None and user is not None and user.is_authenticated:
        linked = Agent.objects.filter(user=user).first()
        if linked is not None:
            return linked.name
        if user.is_staff:
            return f"user:{user.get_username()}"
    raise AppError("AUTH_REQUIRED", "send a bearer token (header or ?token=) or sign in")
