"""Writes for identity: agents and tokens."""

from __future__ import annotations

from typing import Any, cast

from django.utils import timezone

from agentchat.core.db.rows import RowSelect
from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.humans import human_agent
from agentchat.core.identity.registry import heartbeat_due, heartbeat_write
from agentchat.core.identity.revocation import REVOCATIONS_GROUP, REVOKED_KIND
from agentchat.core.live.push import push_on_commit
from agentchat.core.models import Agent, ApiToken, Registration, token_digest, token_generate
from agentchat.core.rules import clock
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


# Every API request runs this lookup; RowSelect spares it the queryset compiler. The
# registration comes along (the agent's heartbeat), in the same query.
_TOKEN_WITH_AGENT = RowSelect(
    (ApiToken, "t"),
    (Agent, "a"),
    (Registration, "r"),
    from_="{ApiToken} t JOIN {Agent} a ON a.id = t.agent_id "
    "LEFT JOIN {Registration} r ON r.agent_id = a.id",
    where="t.digest = %s AND t.revoked_at IS NULL",
)

# A token's ``last_used_at`` (and its agent's ``last_seen``) move at most once a minute: they
# are for the admin to see, and a write per request would contend on SQLite.
TOKEN_TOUCH_SECONDS = 60


def token_authenticate(raw: str | None, *, heartbeat: bool = True) -> tuple[Agent, ApiToken]:
    """Resolve a bearer token, and (``heartbeat``) count the request as its agent's heartbeat
    (``registry.heartbeat_due``): at most one write per agent per AGENTCHAT_HEARTBEAT_SECONDS,
    none between. Raises AUTH_REQUIRED (none given) or AUTH_INVALID."""
    if not raw:
        raise AppError(
            "AUTH_REQUIRED", "authentication required: send Authorization: Bearer <token>"
        )
    row = _TOKEN_WITH_AGENT.first([token_digest(raw)])
    if row is None:
        raise AppError("AUTH_INVALID", "the token is unknown or revoked")
    # One instance per model of the select, in its order; no registration: None.
    token, agent, registration = cast(tuple[ApiToken, Agent, Registration | None], row)
    token.agent = agent
    now = clock.now()
    touch = token.last_used_at is None or (
        (now - token.last_used_at).total_seconds() > TOKEN_TOUCH_SECONDS
    )
    beat = (
        heartbeat
        and registration is not None
        and heartbeat_due(agent.pk, registration.last_heartbeat, now=now)
    )
    if touch or beat:
        with write_atomic():
            if beat:
                heartbeat_write(agent.pk, now=now)
            if touch:
                ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
                Agent.objects.filter(pk=token.agent_id).update(last_seen=now)
    return token.agent, token
