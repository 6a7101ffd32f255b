"""Direct channels: where the HTTP v1 envelopes of a pair of agents are stored as messages.

One channel per pair (``Channel.direct_pair``), made by the pair's first envelope: members-only
with the pair as its roster, so the channel views, search, wait and the folder show a direct
message to its two agents and to nobody else, through the one visibility rule. Its roster,
visibility and topic are fixed (``channel_update`` refuses it) and it takes envelopes only
(``message_post`` refuses any other post, event or audit in it): every message in it has its
``Delivery``.

Its name: ``dm.<a>.<b>`` (the pair sorted) when that is a free channel name of at most 64
characters, else ``dm.<24 hex digits of the pair's digest>`` (then ``-2``, ``-3``), and when a
folder's import took all of those (an import may name channels ``dm.``; the API refuses the
prefix), ``dm.<digest>-<12 random hex digits>``, which no folder can foresee. The name is only a
label: the pair is found by ``direct_pair``, so a channel that already had the name changes
nothing but the name the pair gets.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import cast

from django.db import IntegrityError, transaction

from agentchat.core.db.rows import RowSelect
from agentchat.core.live.push import push_on_commit
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import CHANNEL_NAME_MAX, channel_name_problem, is_record_id
from channels_app.models import Channel
from channels_app.services.groups import ROSTER_GROUP

NAME_PREFIX = "dm."
_NAME_ATTEMPTS = 4
_RANDOM_ATTEMPTS = 4  # names no one can take beforehand: a clash is a 1 in 2**48 chance


def direct_pair_key(a: str, b: str) -> str:
    return " ".join(sorted((a, b)))


def _digest_name(a: str, b: str) -> str:
    return NAME_PREFIX + hashlib.sha256(direct_pair_key(a, b).encode()).hexdigest()[:24]


def direct_channel_names(a: str, b: str) -> list[str]:
    """The names a pair's channel tries, in order."""
    first, second = sorted((a, b))
    readable = f"{NAME_PREFIX}{first}.{second}"
    hashed = _digest_name(a, b)
    names = [hashed] + [f"{hashed}-{n}" for n in range(2, _NAME_ATTEMPTS)]
    if is_record_id(readable, max_length=CHANNEL_NAME_MAX) and not channel_name_problem(readable):
        names.insert(0, readable)
    return names


# Every envelope looks its pair's channel up (RowSelect spares it the queryset compiler).
_BY_PAIR = RowSelect((Channel, "c"), from_="{Channel} c", where="c.direct_pair = %s")


def direct_channel_get(a: str, b: str) -> Channel | None:
    row = _BY_PAIR.first([direct_pair_key(a, b)])
    return None if row is None else cast(Channel, row[0])


def direct_channel_for(a: str, b: str) -> Channel:
    """The pair's direct channel, made when missing (by ``a``'s first envelope to ``b``), in the
    caller's transaction. Two first envelopes at once make one channel: the second insert
    waits on the unique pair and then finds the first's."""
    pair = direct_pair_key(a, b)
    found = direct_channel_get(a, b)
    if found is not None:
        return found
    members = sorted({a, b})
    unforeseen = [f"{_digest_name(a, b)}-{secrets.token_hex(6)}" for _ in range(_RANDOM_ATTEMPTS)]
    for name in direct_channel_names(a, b) + unforeseen:
        try:
            with transaction.atomic():
                channel = Channel.objects.create(
                    name=name,
                    topic=f"direct messages of {' and '.join(members)}",
                    members=members,
                    created_by=a,
                    visibility=Channel.Visibility.MEMBERS,
                    direct_pair=pair,
                )
        except IntegrityError:
            found = Channel.objects.filter(direct_pair=pair).first()
            if found is not None:
                return found
            continue  # the name is another channel's
        push_on_commit(ROSTER_GROUP, {"kind": "channel.created", "channel": channel.pk})
        return channel
    raise AppError("SERVICE_UNAVAILABLE", "no free name for the direct channel; retry")


def direct_channel_refuse(channel: Channel, what: str) -> None:
    """Raises CHANNEL_DIRECT when ``channel`` is a direct channel (``what`` says what it
    refuses)."""
    if channel.direct_pair is not None:
        raise AppError(
            "CHANNEL_DIRECT",
            f"{channel.name} is a direct channel: it takes no {what}; send envelopes through "
            "POST /v1/agents/<id>/messages",
            detail={"channel": channel.name},
        )
