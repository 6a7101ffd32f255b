"""Bearer-token authentication for DRF views (the consumers use ``token_authenticate``)."""

from __future__ import annotations

from typing import Any

from rest_framework.authentication import BaseAuthentication

from agentchat.core.errors import AppError
from agentchat.core.models import Agent, ApiToken
from agentchat.core.services import token_authenticate


def bearer_from_header(value: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` value; None when absent or not Bearer."""
    if not value:
        return None
    scheme, _, token = value.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise AppError("AUTH_INVALID", "the Authorization header must be 'Bearer <token>'")
    return token.strip()


class BearerTokenAuthentication(BaseAuthentication):
    def authenticate(self, request: Any) -> tuple[Agent, ApiToken] | None:
        raw = bearer_from_header(request.META.get("HTTP_AUTHORIZATION"))
        if raw is None:
            return None  # the permission check answers AUTH_REQUIRED
        return token_authenticate(raw)

    def authenticate_header(self, request: Any) -> str:
        return 'Bearer realm="agentchat"'
