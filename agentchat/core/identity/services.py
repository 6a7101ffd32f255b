"""Writes for identity: agents and tokens."""

from __future__ import annotations

from typing import Any, cast

from django.utils import timezone

from agentchat.core.db.rows import RowSelect
from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.humans import human_agent
from agentchat.core.identity.revocation import REVOCATIONS_GROUP, REVOKED_KIND
from agentchat.core.live.push import push_on_commit
from agentchat.core.models import Agent, ApiToken, token_digest, token_generate
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name
from agentchat.relevance import is_subagent

# The request header that names the sub-agent a token acts as (docs/signals.md): the token's
# agent may act as any name under it with a dot, which needs no token of its own.
ACTING_HEADER = "AgentChat-As"
# Sub-agents one agent may have (each made by a first request acting as it): a token cannot
# fill the agents table. Checked when one is made, so concurrent first uses may pass it by a few.
SUBAGENTS_MAX = 256


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


def agent_acting(agent: Agent, name: str | None) -> Agent:
    """The agent a request authenticated as ``agent`` acts as: ``agent`` itself when ``name``
    is None or its own name, else its sub-agent ``name`` (IASP §2: ``alice``'s token acts as
    ``alice.critic`` or ``alice.critic.x``), whose Agent row is made on first use with the
    parent's kind (at most SUBAGENTS_MAX of them). A sub-agent's token never acts as its
    parent, nor any token as a sibling. Raises INVALID_NAME, ACTING_AS_FORBIDDEN,
    SUBAGENTS_TOO_MANY."""
    if name is None or name == agent.name:
        return agent
    check_agent_name(name, field=ACTING_HEADER)
    if not is_subagent(name, agent.name):
        raise AppError(
            "ACTING_AS_FORBIDDEN",
            f"the token belongs to {agent.name!r}: it may act as {agent.name!r} or a sub-agent "
            f"of it ({agent.name}.<name>), not as {name!r}",
            detail={"as": name, "agent": agent.name},
        )
    existing = Agent.objects.filter(name=name).first()
    if existing is not None:
        return existing
    with write_atomic():
        if Agent.objects.filter(name__startswith=agent.name + ".").count() >= SUBAGENTS_MAX:
            raise AppError(
                "SUBAGENTS_TOO_MANY",
                f"{agent.name!r} has {SUBAGENTS_MAX} sub-agents, as many as an agent may",
                detail={"as": name, "agent": agent.name, "max": SUBAGENTS_MAX},
            )
        sub, _ = Agent.objects.get_or_create(name=name, defaults={"kind": agent.kind})
    return sub


def token_authenticate(raw: str | None, *, acting: str | None = None) -> tuple[Agent, ApiToken]:
    """Resolve a bearer token; with ``acting`` (the AgentChat-As header), the sub-agent of
    the token's agent the request acts as (``agent_acting``), with the token it came with.
    Raises AUTH_REQUIRED (none given), AUTH_INVALID, INVALID_NAME, ACTING_AS_FORBIDDEN,
    SUBAGENTS_TOO_MANY."""
    if not raw:
        raise AppError(
            "AUTH_REQUIRED", "authentication required: send Authorization: Bearer <token>"
        )
    row = _TOKEN_WITH_AGENT.first([token_digest(raw)])
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
    return agent_acting(token.agent, acting), token
