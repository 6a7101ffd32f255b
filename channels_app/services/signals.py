"""EP-0118 signals, written: ``signal_post`` (a message with a type) and ``signal_ack`` (the
per-message read markers). Reads are in ``channels_app.signals``."""

from __future__ import annotations

import re
from typing import NamedTuple

from django.db import connection
from django.utils import timezone

from agentchat.core.db.transactions import write_atomic
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name, record_id_check
from agentchat.core.rules.validation import INVISIBLE, text_check
from channels_app.models import Channel, Message, SignalRead
from channels_app.selectors import channel_last_seq_visible
from channels_app.services.limits import BROADCAST_WORDS, MESSAGE_ID_MAX, SIGNAL_TYPES
from channels_app.services.messages import message_post

SIGNAL_TITLE_MAX = 100  # characters of the content's first line that title the message
ACK_IDS_MAX = 1000  # ids one ack may name
_ERROR_IDS = 50  # ids an error names (with the count of all)
_NOT_TITLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]+")


def signal_type_check(value: object) -> str:
    """Raises SIGNAL_INVALID_TYPE."""
    if not isinstance(value, str) or value not in SIGNAL_TYPES:
        raise AppError(
            "SIGNAL_INVALID_TYPE",
            f"type must be one of {', '.join(SIGNAL_TYPES)}",
            detail={
                "field": "type",
                "value": value[:100] if isinstance(value, str) else None,
                "choices": list(SIGNAL_TYPES),
            },
        )
    return value


def signal_recipient(to: object) -> str | None:
    """``to`` of a signal: one agent name (a sub-agent's dotted name among them), or ``*``
    (``all``) for everyone; None for a broadcast. Raises INVALID_NAME."""
    if isinstance(to, str) and to in BROADCAST_WORDS:
        return None
    return check_agent_name(to, field="to")


def signal_title(signal_type: str, content: str) -> str:
    """The message's title: the content's first non-blank line, without controls or invisible
    characters, cut to SIGNAL_TITLE_MAX characters; the type when nothing is left."""
    for line in content.splitlines():
        cleaned = _NOT_TITLE.sub(" ", INVISIBLE.sub("", line)).strip()
        if cleaned:
            if len(cleaned) > SIGNAL_TITLE_MAX:
                cleaned = cleaned[: SIGNAL_TITLE_MAX - 1].rstrip() + "…"
            return cleaned
    return signal_type


@write_atomic()
def signal_post(
    *,
    channel: Channel,
    sender: str,
    sender_kind: str | None = None,
    to: str,
    content: str,
    signal_type: str = "inform",
    message_id: str | None = None,
    reply_to: int | None = None,
) -> tuple[Message, bool]:
    """IASP ``signal(to, content, type)``: a message of ``channel`` from ``sender`` to one
    agent (or ``*``), whose status and type are the signal's type, its body the content and
    its title the content's first line. A retry with the same ``message_id`` returns the first
    (created=False), as for any message. Raises SIGNAL_INVALID_TYPE, INVALID_NAME,
    INVALID_VALUE, FIELD_TOO_LARGE, REPLY_TO_NOT_FOUND, ID_CONFLICT."""
    signal_type_check(signal_type)
    recipient = signal_recipient(to)
    text_check(content, field="content", allow_empty=False)
    return message_post(
        channel=channel,
        sender=sender,
        sender_kind=sender_kind,
        title=signal_title(signal_type, content),
        body=content,
        to=recipient,
        reply_to=reply_to,
        status=signal_type,
        message_id=message_id,
        signal_type=signal_type,
    )


class SignalAck(NamedTuple):
    acked: list[str]  # marked read now, in the order given
    already_read: list[str]  # read before (an idempotent repeat)


def signal_ids_check(ids: object) -> list[str]:
    """``ids`` of an ack: a list of 1 to ACK_IDS_MAX message ids, duplicates dropped (in
    order). Raises INVALID_TYPE, INVALID_VALUE."""
    if not isinstance(ids, list) or not all(isinstance(item, str) for item in ids):
        raise AppError("INVALID_TYPE", "ids must be a list of strings", detail={"field": "ids"})
    if not ids or len(ids) > ACK_IDS_MAX:
        raise AppError(
            "INVALID_VALUE",
            f"ids must name 1 to {ACK_IDS_MAX} signals",
            detail={"field": "ids", "max": ACK_IDS_MAX},
        )
    for item in ids:
        record_id_check(
            item, what="an id", code="INVALID_VALUE", max_length=MESSAGE_ID_MAX, field="ids"
        )
    return list(dict.fromkeys(ids))


def _refused(code: str, message: str, ids: list[str]) -> AppError:
    return AppError(code, message, detail={"ids": ids[:_ERROR_IDS], "count": len(ids)})


@write_atomic()
def signal_ack(*, channel: Channel, agent: Agent, ids: list[str]) -> SignalAck:
    """IASP ``ack_signals(ids)``: mark exactly these signals read for ``agent``, and nothing
    else (no cursor, no other agent's markers). All or nothing: an id that names no signal of
    the channel (SIGNAL_NOT_FOUND) or one not addressed to ``agent`` (SIGNAL_NOT_ADDRESSED:
    to another agent, or its own) marks none. Acknowledging a signal again changes nothing
    (listed in ``already_read``). Raises INVALID_TYPE, INVALID_VALUE, CHANNEL_NOT_FOUND,
    SIGNAL_NOT_FOUND, SIGNAL_NOT_ADDRESSED."""
    wanted = signal_ids_check(ids)
    channel_last_seq_visible(channel, viewer=agent.name)
    found = {
        message.id: message
        for message in Message.objects.filter(channel=channel, pk__in=wanted)
        .exclude(signal_type="")
        .only("id", "sender", "to")
    }
    missing = [item for item in wanted if item not in found]
    if missing:
        raise _refused(
            "SIGNAL_NOT_FOUND", f"no signal {missing[0]!r} in channel {channel.name!r}", missing
        )
    foreign = [item for item in wanted if not found[item].is_relevant_to(agent.name)]
    if foreign:
        raise _refused(
            "SIGNAL_NOT_ADDRESSED",
            f"signal {foreign[0]!r} is not addressed to {agent.name!r} (nor to a sub-agent of "
            "it), or is its own",
            foreign,
        )
    marked = _reads_insert(agent=agent, ids=wanted)
    return SignalAck(
        acked=[item for item in wanted if item in marked],
        already_read=[item for item in wanted if item not in marked],
    )


def _reads_insert(*, agent: Agent, ids: list[str]) -> set[str]:
    """Insert the read markers that do not exist yet, in one statement; returns the ids of
    those it inserted (a concurrent ack of the same id inserts it once: one of them is told
    ``acked``, the other ``already_read``)."""
    table = connection.ops.quote_name(SignalRead._meta.db_table)
    now = connection.ops.adapt_datetimefield_value(timezone.now())
    rows = ", ".join(["(%s, %s, %s)"] * len(ids))
    params: list[int | str | None] = []
    for item in ids:
        params += [agent.pk, item, now]
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (agent_id, message_id, read_at) VALUES {rows} "
            "ON CONFLICT (agent_id, message_id) DO NOTHING RETURNING message_id",
            params,
        )
        return {row[0] for row in cursor.fetchall()}
