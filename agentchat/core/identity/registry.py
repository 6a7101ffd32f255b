"""The agent registry (EP-0118 §1, §4): registration with a run token, heartbeats, and the idle
handshake.

An agent authenticates with its API token, which names one Agent; a **registration** says which
session is that agent now. A session registers (``agent_register``) as the token's agent or one
of its sub-agents (``alice.critic``; when it names none, a new one is generated in the EP's
shape, ``alice.<model>_<hash8>_<random12>``), with its harness, substrate and a run token (made
when it brings none, and then answered once). The run token is that session's: a second
session registering as the same agent while the first is live gets 409 AGENT_ALREADY_ACTIVE,
the same run token reclaims the registration (a restart), and over a stale or idle one a new
registration takes the slot (the old run token is then refused).

Every authenticated request is a heartbeat of the token's agent (``heartbeat_due`` and
``heartbeat_write``, called by ``token_authenticate`` with the registration it read in the same
query as the token): written at most once per AGENTCHAT_HEARTBEAT_SECONDS, by a conditional
UPDATE that only one of several processes wins, and skipped in memory by the requests that
follow in this process. An explicit heartbeat (``agent_heartbeat``) may also say a status.

The idle handshake (``agent_idle``, the EP's ``tired``) marks the caller idle and counts the
other registrations of its session that are active and fresh, in one transaction serialized per
session (an advisory lock on PostgreSQL, the write lock on SQLite), so of agents finishing at
once exactly the last one is told ``last: true``.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, connection, transaction

from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.rates import rate_take
from agentchat.core.models import Agent, Registration
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name
from agentchat.core.rules.presence import (
    ACTIVE,
    CONVERSATION_ID_MAX,
    HARNESS_MAX,
    HEARTBEAT_STATUSES,
    IDLE,
    NOTE_MAX,
    RUN_TOKEN_MAX,
    SUBSTRATE_MAX,
    agent_id_generate,
    is_live,
    presence_status,
)
from agentchat.core.rules.records import ts_micros
from agentchat.core.rules.validation import text_check
from agentchat.relevance import in_namespace

RUN_TOKEN_PREFIX = "rt_"
_GENERATE_ATTEMPTS = 5
# Sub-agents one agent may have (each made by a first request acting as it, or a registration
# naming or generating one): a token cannot fill the agents table. Counted under the parent's
# row lock (``subagent_make``), so concurrent first uses never pass it.
SUBAGENTS_MAX = 256


def subagent_make(parent: Agent, name: str) -> tuple[Agent, bool]:
    """The agent ``name`` (a name under ``parent``, checked by the caller), made of kind agent
    when it does not exist yet; whether it was made. The parent's sub-agents are counted and the
    new one inserted under the parent's row lock (``SELECT … FOR UPDATE`` on PostgreSQL; the
    write lock on SQLite), so of two requests making the 256th and 257th at once exactly one
    wins. Raises SUBAGENTS_TOO_MANY."""
    with write_atomic():
        Agent.objects.select_for_update().filter(pk=parent.pk).values_list("pk").first()
        existing = Agent.objects.filter(name=name).first()
        if existing is not None:
            return existing, False
        if Agent.objects.filter(name__startswith=parent.name + ".").count() >= SUBAGENTS_MAX:
            raise AppError(
                "SUBAGENTS_TOO_MANY",
                f"{parent.name!r} has {SUBAGENTS_MAX} sub-agents, as many as an agent may",
                detail={"as": name, "agent": parent.name, "max": SUBAGENTS_MAX},
            )
        return Agent.objects.create(name=name, kind=Agent.Kind.AGENT), True


def run_token_digest(raw: str) -> str:
    # A run token only tells one session from another of the same agent (whose API token
    # authenticates it), so a plain SHA-256 at rest, as the API tokens.
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def _stale_seconds() -> float:
    return float(settings.AGENTCHAT_STALE_SECONDS)


def registration_record(
    agent: Agent, registration: Registration | None, *, now: datetime
) -> dict[str, Any]:
    """An agent as the registry lists it: ``agent``, ``kind``, ``status`` (active, idle,
    sleeping or stale; None when it never registered), ``last_seen`` (its last heartbeat),
    ``harness``, ``substrate``, ``session``, ``joined_at`` and ``note`` (None unregistered)."""
    if registration is None:
        return {
            "agent": agent.name,
            "kind": agent.kind,
            "status": None,
            "last_seen": None,
            "harness": agent.harness or None,
            "substrate": None,
            "session": None,
            "joined_at": None,
            "note": None,
        }
    return {
        "agent": agent.name,
        "kind": agent.kind,
        "status": presence_status(
            registration.status,
            registration.last_heartbeat,
            now=now,
            stale_seconds=_stale_seconds(),
        ),
        "last_seen": ts_micros(registration.last_heartbeat),
        "harness": registration.harness,
        "substrate": registration.substrate,
        "session": registration.session or None,
        "joined_at": ts_micros(registration.joined_at),
        "note": registration.note,
    }


def _fields_check(*, harness: Any, substrate: Any, conversation_id: Any) -> None:
    text_check(harness, field="harness", single_line=True, allow_empty=False, max_chars=HARNESS_MAX)
    text_check(substrate, field="substrate", single_line=True, max_chars=SUBSTRATE_MAX)
    text_check(
        conversation_id, field="conversation_id", single_line=True, max_chars=CONVERSATION_ID_MAX
    )


def _run_token_check(run_token: Any) -> str:
    return text_check(
        run_token, field="run_token", single_line=True, allow_empty=False, max_chars=RUN_TOKEN_MAX
    )


def _own(caller: Agent, name: str) -> str:
    """``name``, when the caller's token may act as it (itself or its sub-agents). Raises
    INVALID_NAME, AGENT_OUTSIDE_NAMESPACE."""
    check_agent_name(name, field="agent")
    if not in_namespace(name, caller.name):
        raise AppError(
            "AGENT_OUTSIDE_NAMESPACE",
            f"the token of {caller.name!r} acts as {caller.name!r} and {caller.name}.* only, "
            f"not as {name!r}",
            detail={"agent": name, "token_agent": caller.name},
        )
    return name


def _not_human(agent: Agent) -> Agent:
    if agent.kind == Agent.Kind.HUMAN:
        raise AppError(
            "AGENT_OUTSIDE_NAMESPACE",
            f"{agent.name!r} is a person's agent: people sign in, sessions register",
            detail={"agent": agent.name},
        )
    return agent


# A sub-agent a registration makes is a row that stays (its messages name it): making one takes
# a post from the caller's budget (``rates``), so a loop of registrations grows the database no
# faster than a loop of posts may.


def _target_new(caller: Agent, *, harness: str, substrate: str, conversation_id: str) -> Agent:
    """A new sub-agent of the caller under a generated id (the EP's shape). Raises
    RATE_LIMITED, SUBAGENTS_TOO_MANY."""
    for _ in range(_GENERATE_ATTEMPTS):
        name = agent_id_generate(
            parent=caller.name,
            harness=harness,
            substrate=substrate,
            conversation_id=conversation_id,
        )
        if name is None:
            raise AppError(
                "INVALID_NAME",
                f"{caller.name!r} is too long to hold a generated sub-agent id: name the agent",
                detail={"field": "agent"},
            )
        made, new = subagent_make(caller, name)
        if not new:
            continue  # a name already made: draw another
        rate_take(agent=caller.name)
        return made
    raise RuntimeError("no free generated agent id")  # 48 random bits: not reachable


def _target(caller: Agent, name: str) -> Agent:
    """The agent ``name`` the caller registers as, made when it is new. Raises INVALID_NAME,
    AGENT_OUTSIDE_NAMESPACE, RATE_LIMITED, SUBAGENTS_TOO_MANY."""
    _own(caller, name)
    if name == caller.name:
        return _not_human(caller)
    agent = Agent.objects.filter(name=name).first()
    if agent is None:
        agent, new = subagent_make(caller, name)
        if new:
            rate_take(agent=caller.name)
    return _not_human(agent)


def _locked(agent: Agent) -> Registration | None:
    return Registration.objects.select_for_update().filter(agent=agent).first()


def _live_check(registration: Registration, agent: Agent, *, now: datetime) -> None:
    """A registration of another run token that still holds the agent's slot (``is_live``:
    fresh and not idle) keeps it. Raises AGENT_ALREADY_ACTIVE."""
    if is_live(
        registration.status, registration.last_heartbeat, now=now, stale_seconds=_stale_seconds()
    ):
        raise AppError(
            "AGENT_ALREADY_ACTIVE",
            f"{agent.name!r} is registered by a live session with another run token; register "
            "under another id, or wait until it is stale",
            detail={
                "agent": agent.name,
                "status": registration.status,
                "last_seen": ts_micros(registration.last_heartbeat),
            },
        )


@dataclass(frozen=True)
class Registered:
    record: dict[str, Any]
    created: bool  # a new registration (201), not a reclaim (200)
    run_token: str | None  # the one the server made (answered once), None when it was given


@write_atomic()
def agent_register(
    *,
    caller: Agent,
    agent: str | None = None,
    harness: str,
    substrate: str = "",
    run_token: str | None = None,
    conversation_id: str = "",
    session: str = "",
) -> Registered:
    """Register a session as ``agent`` (the caller's own name or a sub-agent's; generated under
    the caller when None). ``session`` is a channel's name the caller may see (the view checks
    it) or "". A live registration with another run token refuses it; the same run token
    reclaims it (200); a stale or idle one is replaced by a new registration (201).

    A sub-agent made here takes a post from the caller's budget (``rates``).

    Raises INVALID_VALUE, INVISIBLE_CHARACTER, FIELD_TOO_LARGE, INVALID_NAME,
    AGENT_OUTSIDE_NAMESPACE, AGENT_ALREADY_ACTIVE, RATE_LIMITED."""
    _fields_check(harness=harness, substrate=substrate, conversation_id=conversation_id)
    made = None
    if run_token is None:
        made = run_token = RUN_TOKEN_PREFIX + secrets.token_urlsafe(24)
    digest = run_token_digest(_run_token_check(run_token))
    target = (
        _target_new(caller, harness=harness, substrate=substrate, conversation_id=conversation_id)
        if agent is None
        else _target(caller, agent)
    )
    now = clock.now()
    fields = {
        "harness": harness,
        "substrate": substrate,
        "session": session,
        "status": ACTIVE,
        "status_at": now,
        "last_heartbeat": now,
        "note": "",
    }
    registration = _locked(target)
    if registration is None:
        try:
            with transaction.atomic():
                registration = Registration.objects.create(
                    agent=target, run_token_digest=digest, joined_at=now, **fields
                )
            _touched(target.pk, now)
            return Registered(registration_record(target, registration, now=now), True, made)
        except IntegrityError:  # registered concurrently (PostgreSQL): judged against it
            registration = _locked(target)
            assert registration is not None
    created = registration.run_token_digest != digest  # else a reclaim: the session restarted
    if created:
        _live_check(registration, target, now=now)
        fields.update(run_token_digest=digest, joined_at=now)
    Registration.objects.filter(pk=target.pk).update(**fields)
    for name, value in fields.items():
        setattr(registration, name, value)
    _touched(target.pk, now)
    return Registered(registration_record(target, registration, now=now), created, made)


def _registration_of(
    caller: Agent, agent: str | None, run_token: str | None, *, now: datetime
) -> tuple[Agent, Registration]:
    """The caller's (or its sub-agent's) registration, locked; a run token given must be
    its own. Raises INVALID_NAME, AGENT_OUTSIDE_NAMESPACE, AGENT_NOT_REGISTERED,
    AGENT_ALREADY_ACTIVE."""
    name = _own(caller, caller.name if agent is None else agent)
    target = caller if name == caller.name else Agent.objects.filter(name=name).first()
    registration = _locked(target) if target is not None else None
    if target is None or registration is None:
        raise AppError(
            "AGENT_NOT_REGISTERED",
            f"{name!r} is not registered: POST agents/register/ first",
            detail={"agent": name},
        )
    if run_token is not None and run_token_digest(_run_token_check(run_token)) != (
        registration.run_token_digest
    ):
        _live_check(registration, target, now=now)
        raise AppError(
            "AGENT_NOT_REGISTERED",
            f"the registration of {name!r} with this run token was replaced: register again",
            detail={"agent": name},
        )
    return target, registration


@write_atomic()
def agent_heartbeat(
    *, caller: Agent, agent: str | None = None, run_token: str | None = None, status: str = ACTIVE
) -> dict[str, Any]:
    """An explicit heartbeat of a registration, saying its status (``active`` by default, or
    ``sleeping``): a heartbeat as active after the idle handshake reverses it. Raises
    INVALID_VALUE, INVALID_NAME, AGENT_OUTSIDE_NAMESPACE, AGENT_NOT_REGISTERED,
    AGENT_ALREADY_ACTIVE."""
    if status not in HEARTBEAT_STATUSES:
        raise AppError(
            "INVALID_VALUE",
            f"status must be one of {', '.join(HEARTBEAT_STATUSES)} (idle: POST agents/idle/)",
            detail={"field": "status"},
        )
    now = clock.now()
    target, registration = _registration_of(caller, agent, run_token, now=now)
    fields: dict[str, Any] = {"last_heartbeat": now}
    if registration.status != status:
        fields.update(status=status, status_at=now, note="")
    Registration.objects.filter(pk=target.pk).update(**fields)
    for name, value in fields.items():
        setattr(registration, name, value)
    _touched(target.pk, now)
    return registration_record(target, registration, now=now)


@dataclass(frozen=True)
class IdleAnswer:
    agent: str
    others_active: int
    last: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "status": IDLE,
            "others_active": self.others_active,
            "last": self.last,
        }


def _session_serialize(session: str) -> None:
    """Queue the idle handshakes of one session behind each other until the transaction ends:
    on PostgreSQL an advisory lock (a row lock would not see a registration that a concurrent
    handshake is about to count); SQLite's write transaction already holds the one write lock."""
    if connection.vendor == "postgresql":
        key = int.from_bytes(hashlib.sha256(f"registry:{session}".encode()).digest()[:8], "big")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [key - (1 << 63)])


@write_atomic()
def agent_idle(
    *, caller: Agent, agent: str | None = None, run_token: str | None = None, note: str = ""
) -> IdleAnswer:
    """The idle handshake (the EP's ``tired``): mark the registration idle with ``note``, and
    count the other registrations of its session that are active and fresh. ``last`` is true
    when there are none: of sessions finishing at once, exactly one is told it is last. Raises
    INVALID_VALUE, INVISIBLE_CHARACTER, INVALID_NAME, AGENT_OUTSIDE_NAMESPACE,
    AGENT_NOT_REGISTERED, AGENT_ALREADY_ACTIVE."""
    text_check(note, field="note", max_chars=NOTE_MAX)
    now = clock.now()
    target, registration = _registration_of(caller, agent, run_token, now=now)
    _session_serialize(registration.session)
    Registration.objects.filter(pk=target.pk).update(
        status=IDLE, status_at=now, last_heartbeat=now, note=note
    )
    others = (
        Registration.objects.filter(
            session=registration.session,
            status=ACTIVE,
            last_heartbeat__gte=now - timedelta(seconds=_stale_seconds()),
        )
        .exclude(pk=target.pk)
        .count()
    )
    _touched(target.pk, now)
    return IdleAnswer(target.name, others, others == 0)


# --- the heartbeat of every request ---------------------------------------------------------

# agent id -> the heartbeat this process last wrote (or saw written): the requests that follow
# within the interval write nothing, even those that read the registration before it committed.
_written: dict[int, datetime] = {}
_written_lock = threading.Lock()
_WRITTEN_MAX = 10_000


def _touched(agent_id: int, at: datetime) -> None:
    with _written_lock:
        if len(_written) >= _WRITTEN_MAX:
            _written.clear()  # forgetting only costs a conditional UPDATE each
        _written[agent_id] = at


def heartbeat_due(agent_id: int, last_heartbeat: datetime, *, now: datetime) -> bool:
    """Whether a request of the agent at ``now`` should write its heartbeat: the registration's
    (as read with the token) and this process's last write are both older than the interval."""
    interval = float(settings.AGENTCHAT_HEARTBEAT_SECONDS)
    if (now - last_heartbeat).total_seconds() < interval:
        return False
    with _written_lock:
        seen = _written.get(agent_id)
    # A memory from the future (a clock set back) is no reason to stay silent.
    return seen is None or not 0 <= (now - seen).total_seconds() < interval


def heartbeat_write(agent_id: int, *, now: datetime) -> bool:
    """Move the registration's heartbeat to ``now`` unless another request (of any process)
    moved it within the interval: one conditional UPDATE, in the caller's transaction. Whether
    this one wrote it."""
    interval = timedelta(seconds=float(settings.AGENTCHAT_HEARTBEAT_SECONDS))
    _touched(agent_id, now)
    return bool(
        Registration.objects.filter(pk=agent_id, last_heartbeat__lte=now - interval).update(
            last_heartbeat=now
        )
    )
