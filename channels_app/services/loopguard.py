"""The loop guard: agents answering each other without end (the echo storm), detected cheaply.

In one channel, a **run** is the consecutive messages posted by agents, each within
``AGENTCHAT_LOOP_GUARD_SECONDS`` of the one before. A human's post ends it (and lifts a flag), so
does a task, lease or path-lock change (their audit messages: work moved); the server's other
audit messages (a whiteboard write, a channel update, a compaction, ``loop.suspected``) neither
count nor end it. A run of ``AGENTCHAT_LOOP_GUARD_MESSAGES`` messages from at least two agents
(one agent alone is no exchange, and the post budget bounds it) **flags** the channel: the
server posts one ``loop.suspected`` audit message, the dashboard shows the flag, and with
``AGENTCHAT_LOOP_GUARD_REFUSE`` the channel refuses the posts of the agents whose namespace took
part in the run (429 ``LOOP_SUSPECTED``, ``Retry-After`` the rest of the cool-down) until a human
posts or ``AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS`` pass; then a new run starts from nothing. Any
other agent posts as before (``_took_part``).

The state is one row per channel (``LoopGuard``), taken by one statement in the posting
transaction: an upsert whose ``SET`` reads the old row (``ON CONFLICT … DO UPDATE``, the same on
PostgreSQL and SQLite), under the channel's row lock that the seq allocation already holds. So
a post adds one query whatever the channel's length, concurrent posts of a channel count one
after the other (exactly one of them crosses the threshold), and a refused or rolled-back post
leaves the count as it was.

A direct channel (HTTP v1) is counted and refuses as any other, but gets no audit message (it
holds envelopes only): its flag shows on the dashboard.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db import connection

from agentchat.core.models import Agent
from agentchat.core.rules.audit import status_key
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.presence import namespace_root
from channels_app.models import LoopGuard, Message

EVENT_LOOP_SUSPECTED = "loop.suspected"
# The audit messages that say work moved: a task, lease or path-lock change ends a run.
_PROGRESS_PREFIXES = ("task.", "lease.", "path.lock")


@dataclass(frozen=True)
class LoopConfig:
    messages: int
    seconds: float
    cooldown: float
    refuse: bool


def loop_config() -> LoopConfig | None:
    """The configured guard (None: off)."""
    messages = int(settings.AGENTCHAT_LOOP_GUARD_MESSAGES)
    if messages <= 0:
        return None
    return LoopConfig(
        messages=messages,
        seconds=float(settings.AGENTCHAT_LOOP_GUARD_SECONDS),
        cooldown=float(settings.AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS),
        refuse=bool(settings.AGENTCHAT_LOOP_GUARD_REFUSE),
    )


@dataclass(frozen=True)
class LoopFlag:
    """What a counted post did: ``flagged_now`` when it crossed the threshold."""

    run: int
    from_seq: int
    flagged_now: bool


def _table() -> str:
    return connection.ops.quote_name(LoopGuard._meta.db_table)


def _upsert_sql(config: LoopConfig) -> str:
    t = _table()
    # Every SET expression reads the old row (t.*) and this post (excluded.*).
    expired = (
        f"({t}.flagged_at IS NOT NULL AND excluded.last_at >= {t}.flagged_at + {config.cooldown!r})"
    )
    flagged = f"({t}.flagged_at IS NOT NULL AND NOT {expired})"
    goes_on = (
        f"({t}.run > 0 AND {t}.last_at IS NOT NULL "
        f"AND excluded.last_at - {t}.last_at <= {config.seconds!r} AND NOT {expired})"
    )
    run = f"(CASE WHEN {goes_on} THEN {t}.run + 1 ELSE 1 END)"
    mixed = (
        f"(CASE WHEN {goes_on} THEN ({t}.mixed OR {t}.first_sender <> excluded.first_sender) "
        "ELSE false END)"
    )
    crosses = f"(NOT {flagged} AND {run} >= {config.messages:d} AND {mixed})"
    return (
        f"INSERT INTO {t} (channel_id, run, run_from_seq, first_sender, mixed, last_at, "
        "flagged_at, flagged_seq, flag_new) VALUES (%s, 1, %s, %s, false, %s, NULL, NULL, false) "
        "ON CONFLICT (channel_id) DO UPDATE SET "
        f"run = {run}, "
        f"run_from_seq = CASE WHEN {goes_on} THEN {t}.run_from_seq ELSE excluded.run_from_seq END, "
        f"first_sender = CASE WHEN {goes_on} THEN {t}.first_sender ELSE excluded.first_sender END, "
        f"mixed = {mixed}, "
        "last_at = excluded.last_at, "
        f"flagged_at = CASE WHEN {flagged} THEN {t}.flagged_at "
        f"WHEN {crosses} THEN excluded.last_at ELSE NULL END, "
        f"flagged_seq = CASE WHEN {flagged} THEN {t}.flagged_seq ELSE NULL END, "
        f"flag_new = {crosses} "
        f"RETURNING run, run_from_seq, flagged_at, flag_new, last_at"
    )


def _counts(message: Message) -> str:
    """``count`` (an agent's post), ``reset`` (a human's), ``progress`` (a task or lock
    change) or ``neutral`` (the server's other audit messages)."""
    if message.kind == Message.Kind.AUDIT:
        return (
            "progress" if status_key(message.status).startswith(_PROGRESS_PREFIXES) else "neutral"
        )
    if message.sender_kind == Agent.Kind.HUMAN:
        return "reset"
    return "count"


def loop_guard_step(message: Message, *, now: datetime) -> LoopFlag | None:
    """Count ``message`` (just given its seq, in the posting transaction) in its channel's run;
    returns what it did when it was counted (None otherwise). One statement, none for a neutral
    audit message or with the guard off.

    Raises LOOP_SUSPECTED when the channel is flagged, refusing is on and the cool-down has not
    passed (the caller's transaction rolls back: the refusal counts nothing)."""
    config = loop_config()
    if config is None:
        return None
    what = _counts(message)
    if what == "neutral":
        return None
    t = _table()
    with connection.cursor() as cursor:
        if what != "count":
            # A human's post lifts the flag; a task or lock change ends the run only.
            lift = ", flagged_at = NULL, flagged_seq = NULL" if what == "reset" else ""
            cursor.execute(
                f"UPDATE {t} SET run = 0, mixed = false, first_sender = '', last_at = NULL, "
                f"flag_new = false{lift} WHERE channel_id = %s",
                [message.channel_id],
            )
            return None
        at = now.timestamp()
        cursor.execute(_upsert_sql(config), [message.channel_id, message.seq, message.sender, at])
        run, from_seq, flagged_at, flag_new, _ = cursor.fetchone()
    if (
        flagged_at is not None
        and not flag_new
        and config.refuse
        and _took_part(message, config.messages)
    ):
        retry_after = max(1, math.ceil(round(flagged_at + config.cooldown - at, 6)))
        raise AppError(
            "LOOP_SUSPECTED",
            f"channel {message.channel.name!r} is flagged for a suspected loop of agents "
            "answering each other (AGENTCHAT_LOOP_GUARD_REFUSE): agents may post again once a "
            f"human posts, or in {retry_after} s",
            detail={
                "channel": message.channel.name,
                "flagged_seq": _flagged_seq(message.channel_id),
                "retry_after": retry_after,
            },
        )
    return LoopFlag(run=int(run), from_seq=int(from_seq), flagged_now=bool(flag_new))


def _took_part(message: Message, run: int) -> bool:
    """Whether ``message``'s sender is of a namespace (its root, any sub-agent) that took part
    in the run that flagged its channel: the ``run`` agents' messages before the flag's
    ``loop.suspected``. A refusal is for them only: one agent and its own sub-agent make a run
    of two senders, and a flag refusing everyone would let one token silence the channel for
    every other agent. A direct channel (no ``loop.suspected``: its pair are the run) refuses
    both. One query, of ``run`` rows, and only while the channel is flagged."""
    flagged_seq = _flagged_seq(message.channel_id)
    if flagged_seq is None:
        return True
    senders = (
        Message.objects.filter(
            channel_id=message.channel_id,
            seq__lt=flagged_seq,
            sender_kind=Agent.Kind.AGENT,
        )
        .exclude(kind=Message.Kind.AUDIT)
        .order_by("-seq")
        .values_list("sender", flat=True)[:run]
    )
    root = namespace_root(message.sender)
    return any(namespace_root(sender) == root for sender in senders)


def _flagged_seq(channel_id: int) -> int | None:
    return LoopGuard.objects.filter(pk=channel_id).values_list("flagged_seq", flat=True).first()


def loop_flag_record(*, channel_id: int, seq: int | None) -> None:
    """Note the seq of the ``loop.suspected`` message of the flag just set."""
    LoopGuard.objects.filter(pk=channel_id).update(flagged_seq=seq, flag_new=False)
