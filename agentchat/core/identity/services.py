"""Writes for identity: agents and tokens."""

from __future__ import annotations

import hmac
from typing import Any, cast

from django.conf import settings
from django.utils import timezone

from agentchat.core.db.rows import RowSelect
from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.humans import human_agent
from agentchat.core.identity.revocation import REVOCATIONS_GROUP, REVOKED_KIND
from agentchat.core.live.push import push_on_commit
from agentchat.core.models import Agent, ApiToken, token_digest, token_generate
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name


@write_atomic()
def agent_get_or_create(*, name: str, kind: str = Agent.Kind.AGENT) -> Agent:
    """Raises INVALID_NAME."""
    check_agent_name(name)
    agent, _ = Agent.objects.get_or_create(name=name, defaults={"kind": kind})
    return agent


def admin_actor(user: Any) -> str:
    """Who an admin action is done by, as audit messages name it: the admin's human agent
    (made on first use, as on the dashboard), so its audit says ``sender_kind: human``."""
    return human_agent(user).name


@write_atomic()
def token_create(*, agent: Agent, label: str = "") -> str:
    """Create a token for ``agent`` and return the raw value; only its digest is stored."""
    raw = token_generate()
    ApiToken.objects.create(agent=agent, digest=token_digest(raw), hint=raw[:10], label=label)
    return raw


@write_atomic()
def token_revoke(*, token: ApiToken) -> None:
    """Revoke a token: REST refuses it at once, and its live sessions (parked waits,
    websockets) end within seconds (``agentchat.core.identity.revocation``). The management command
    and the admin's "Revoke token" both come here."""
    revoked = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    if revoked:
        push_on_commit(REVOCATIONS_GROUP, {"kind": REVOKED_KIND, "token_ids": [token.pk]})


# Every API request runs this lookup; RowSelect spares it the queryset compiler.
_TOKEN_WITH_AGENT = RowSelect(
    (ApiToken, "t"),
    (Agent, "a"),
    from_="{ApiToken} t JOIN {Agent} a ON a.id = t.agent_id",
    where="t.digest = %s AND t.revoked_at IS NULL",
)


def _is_admin_digest(digest: str) -> bool:
    """Whether ``digest`` is the admin token's (AGENT_CHAT_ADMIN_TOKEN), compared in constant
    time: digests of equal length, whatever was sent."""
    admin = settings.AGENTCHAT_ADMIN_TOKEN
    return bool(admin) and hmac.compare_digest(digest, token_digest(admin))


def token_authenticate(raw: str | None) -> tuple[Agent, ApiToken]:
    """Resolve a bearer token. Raises AUTH_REQUIRED (none given), ADMIN_TOKEN_NOT_ALLOWED (the
    admin monitor's token: only ``admin_token_authenticate`` takes it) or AUTH_INVALID."""
    if not raw:
        raise AppError(
            "AUTH_REQUIRED", "authentication required: send Authorization: Bearer <token>"
        )
    digest = token_digest(raw)
    if _is_admin_digest(digest):
        raise AppError(
            "ADMIN_TOKEN_NOT_ALLOWED",
            "the admin token is for the admin monitor (GET /v1/monitor) only: use an agent's token",
        )
    row = _TOKEN_WITH_AGENT.first([digest])
    if row is None:
        raise AppError("AUTH_INVALID", "the token is unknown or revoked")
    # One instance per model of the select, in its order.
    token, agent = cast(tuple[ApiToken, Agent], row)
    token.agent = agent
    now = timezone.now()
    # Touch at most once a minute: a write per request would contend on SQLite.
    if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
        with write_atomic():
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
            Agent.objects.filter(pk=token.agent_id).update(last_seen=now)
    return token.agent, token


def admin_token_authenticate(raw: str | None) -> None:
    """Accept the admin monitor's token (AGENT_CHAT_ADMIN_TOKEN) and nothing else, compared in
    constant time. Raises MONITOR_DISABLED (the server has none), AUTH_REQUIRED (no token sent)
    or ADMIN_TOKEN_REQUIRED (any other token: an agent's token never reads every inbox)."""
    if not settings.AGENTCHAT_ADMIN_TOKEN:
        raise AppError(
            "MONITOR_DISABLED", "the admin monitor is disabled: the server has no admin token"
        )
    if not raw:
        raise AppError(
            "AUTH_REQUIRED", "authentication required: send Authorization: Bearer <admin token>"
        )
    if not _is_admin_digest(token_digest(raw)):
        raise AppError(
            "ADMIN_TOKEN_REQUIRED", "the admin monitor takes the server's admin token only"
        )
