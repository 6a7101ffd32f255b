"""Bearer-token authentication for DRF views (the live endpoints use ``token_authenticate``)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from agentchat.core.identity.services import admin_token_authenticate, token_authenticate
from agentchat.core.models import Agent, ApiToken
from agentchat.core.rules.errors import AppError


def bearer_from_header(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; None when absent or not Bearer."""
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AppError("AUTH_INVALID", "the Authorization header must be 'Bearer <token>'")
    return token.strip()


class AgentRequest(Request):
    """The type of a request ``BearerTokenAuthentication`` authenticated: DRF builds a plain
    ``Request``, whose ``user`` is the token's Agent behind the default IsAuthenticated (the
    stubs know only Django's users). Views annotate their request with it; never built."""

    # The Agent is no Django user: the stubs' type for ``user`` cannot be narrowed to it.
    user: Agent  # type: ignore[assignment]
    auth: ApiToken


def sender_check(request: AgentRequest, claimed: object, *, field: str = "from") -> None:
    """A body's claimed sender (a post's ``from``, a new task's ``created_by``), when it names
    one, must be the token's agent. Raises SENDER_MISMATCH (403)."""
    if claimed is not None and claimed != request.user.name:
        raise AppError(
            "SENDER_MISMATCH",
            f"the token belongs to {request.user.name!r}, not {claimed!r}",
            detail={field: claimed, "agent": request.user.name},
        )


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Agent, ApiToken] | None:
        raw = bearer_from_header(request.META.get("HTTP_AUTHORIZATION"))
        if raw is None:
            return None  # the permission check answers AUTH_REQUIRED
        # A view that writes the registry itself (register, heartbeat, idle) is no implicit
        # heartbeat: a new session registering must see whether the old one went silent.
        # AgentChat-As (identity.services.ACTING_HEADER): the sub-agent the token acts as.
        view = (getattr(request, "parser_context", None) or {}).get("view")
        return token_authenticate(
            raw,
            heartbeat=getattr(view, "implicit_heartbeat", True),
            acting=request.META.get("HTTP_AGENTCHAT_AS"),
        )

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="agentchat"'


class MonitorAdmin:
    """Who ``AdminTokenAuthentication`` authenticated: the holder of the admin token, no agent
    (DRF's IsAuthenticated asks only ``is_authenticated``)."""

    is_authenticated = True


class AdminTokenAuthentication(BaseAuthentication):
    """The admin monitor's authentication (AGENT_CHAT_ADMIN_TOKEN): ``admin_token_authenticate``.
    On a server without an admin token every request is MONITOR_DISABLED, whatever it sends;
    without a token the permission check answers AUTH_REQUIRED, as on agents' endpoints."""

    def authenticate(self, request: Any) -> tuple[MonitorAdmin, None] | None:
        if not settings.AGENTCHAT_ADMIN_TOKEN:
            admin_token_authenticate(None)  # raises MONITOR_DISABLED
        raw = bearer_from_header(request.META.get("HTTP_AUTHORIZATION"))
        if raw is None:
            return None
        admin_token_authenticate(raw)
        return MonitorAdmin(), None

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="agentchat"'
