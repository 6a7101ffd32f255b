"""Writes for identity: agents and tokens."""

from __future__ import annotations

import hmac
import threading
from collections import OrderedDict
from datetime import datetime
from typing import Any, cast

from django.conf import settings
from django.utils import timezone

from agentchat.core.db.rows import RowSelect
from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.humans import human_agent
from agentchat.core.identity.registry import (
    heartbeat_due,
    heartbeat_write,
    subagent_make,
)
from agentchat.core.identity.revocation import REVOCATIONS_GROUP, REVOKED_KIND
from agentchat.core.live.push import push_on_commit
from agentchat.core.models import Agent, ApiToken, Registration, token_digest, token_generate
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name
from agentchat.relevance import in_namespace

# The request header that names the sub-agent a token acts as (docs/signals.md): the token's
# agent may act as any name under it with a dot, which needs no token of its own.
ACTING_HEADER = "AgentChat-As"


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
        # Now, not on commit: a token merely forgotten costs its next heavy request a lookup.
        token_agents.drop(token.digest)


class TokenAgents:
    """Which agent a token belongs to, by the token's digest, for the tokens seen lately: what
    the heavy gate keys a request by (``agentchat.core.http.lane.heavy_gate_key``), so that an
    agent's tokens share one place in it. Filled by authentication and ``token_agent``;
    bounded (the least recently used go first); a token that fails authentication, or is
    revoked in this process, is dropped (one revoked elsewhere is dropped by its next request,
    which fails authentication). Shared by the event loop and the database threads."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._agents: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, digest: str) -> int | None:
        with self._lock:
            agent_id = self._agents.get(digest)
            if agent_id is not None:
                self._agents.move_to_end(digest)
            return agent_id

    def put(self, digest: str, agent_id: int) -> None:
        with self._lock:
            self._agents[digest] = agent_id
            self._agents.move_to_end(digest)
            if len(self._agents) > self._size:
                self._agents.popitem(last=False)

    def drop(self, digest: str) -> None:
        with self._lock:
            self._agents.pop(digest, None)


token_agents = TokenAgents()


def token_agent_cached(raw: str) -> int | None:
    """The id of the agent whose token ``raw`` is, if ``token_agents`` knows (no query)."""
    return token_agents.get(token_digest(raw))


def token_agent(raw: str) -> int | None:
    """The id of the agent whose live token ``raw`` is (None: unknown or revoked), from
    ``token_agents`` or else one indexed select, which fills it. Sync: run it on the pool."""
    digest = token_digest(raw)
    agent_id = token_agents.get(digest)
    if agent_id is None:
        agent_id = (
            ApiToken.objects.filter(digest=digest, revoked_at__isnull=True)
            .values_list("agent_id", flat=True)
            .first()
        )
        if agent_id is not None:
            token_agents.put(digest, agent_id)
    return agent_id


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


def _is_admin_digest(digest: str) -> bool:
    """Whether ``digest`` is the admin token's (AGENT_CHAT_ADMIN_TOKEN), compared in constant
    time: digests of equal length, whatever was sent."""
    admin = settings.AGENTCHAT_ADMIN_TOKEN
    return bool(admin) and hmac.compare_digest(digest, token_digest(admin))


def agent_acting(agent: Agent, name: str | None) -> Agent:
    """The agent a request authenticated as ``agent`` acts as: ``agent`` itself when ``name`` is
    None or its own name, else its sub-agent ``name`` (IASP §2: ``alice``'s token acts as
    ``alice.critic`` or ``alice.critic.x``), whose Agent row is made on first use (at most
    ``registry.SUBAGENTS_MAX`` of them: ``registry.subagent_make``). A sub-agent's token never
    acts as its parent, nor any token as a sibling. A sub-agent is always an agent, never a
    person: no token acts as a person's agent that happens to be named under it
    (``carol.human``, a person's agent beside an agent ``carol``), and a person's token makes
    sub-agents of kind agent, so that no one answers an approval as a person through a header.
    Raises INVALID_NAME, ACTING_AS_FORBIDDEN, SUBAGENTS_TOO_MANY."""
    if name is None or name == agent.name:
        return agent
    check_agent_name(name, field=ACTING_HEADER)
    # The one namespace rule (agentchat.relevance), as registration's AGENT_OUTSIDE_NAMESPACE:
    # two surfaces, two documented codes.
    if not in_namespace(name, agent.name):
        raise AppError(
            "ACTING_AS_FORBIDDEN",
            f"the token belongs to {agent.name!r}: it may act as {agent.name!r} or a sub-agent "
            f"of it ({agent.name}.<name>), not as {name!r}",
            detail={"as": name, "agent": agent.name},
        )
    # Its registration comes along, for the request's heartbeat (``token_authenticate``).
    existing = Agent.objects.filter(name=name).select_related("registration").first()
    if existing is not None and existing.kind != Agent.Kind.AGENT:
        raise AppError(
            "ACTING_AS_FORBIDDEN",
            f"{name!r} is a person's agent: no token acts as a person",
            detail={"as": name, "agent": agent.name},
        )
    if existing is not None:
        return existing
    sub, _ = subagent_make(agent, name)
    if sub.kind != Agent.Kind.AGENT:  # a person's agent made meanwhile under that name
        raise AppError(
            "ACTING_AS_FORBIDDEN",
            f"{name!r} is a person's agent: no token acts as a person",
            detail={"as": name, "agent": agent.name},
        )
    return sub


def token_authenticate(
    raw: str | None, *, heartbeat: bool = True, acting: str | None = None
) -> tuple[Agent, ApiToken]:
    """Resolve a bearer token, and (``heartbeat``) count the request as its agent's heartbeat
    (``registry.heartbeat_due``): at most one write per agent per AGENTCHAT_HEARTBEAT_SECONDS,
    none between; with ``acting`` (the AgentChat-As header), the sub-agent of the token's agent
    the request acts as (``agent_acting``), with the token it came with. Raises AUTH_REQUIRED
    (none given), ADMIN_TOKEN_NOT_ALLOWED (the admin monitor's token: only
    ``admin_token_authenticate`` takes it), AUTH_INVALID, INVALID_NAME, ACTING_AS_FORBIDDEN,
    SUBAGENTS_TOO_MANY."""
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
        token_agents.drop(digest)
        raise AppError("AUTH_INVALID", "the token is unknown or revoked")
    # One instance per model of the select, in its order; no registration: None.
    token, agent, registration = cast(tuple[ApiToken, Agent, Registration | None], row)
    token.agent = agent
    token_agents.put(digest, agent.pk)
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
    acting_agent = agent_acting(token.agent, acting)
    if heartbeat and acting_agent is not token.agent:
        _subagent_heartbeat(acting_agent, now=now)
    return acting_agent, token


def _subagent_heartbeat(sub: Agent, *, now: datetime) -> None:
    """A request acting as a registered sub-agent is its heartbeat too (its parent's session
    runs it), under the same rule: at most one write per agent per AGENTCHAT_HEARTBEAT_SECONDS.
    Its registration came with its row (``agent_acting``); a sub-agent just made has none."""
    registration = getattr(sub, "registration", None)
    if registration is not None and heartbeat_due(sub.pk, registration.last_heartbeat, now=now):
        with write_atomic():
            heartbeat_write(sub.pk, now=now)


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
