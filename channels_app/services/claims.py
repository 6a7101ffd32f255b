"""Marker claims: who claimed which marker of a channel."""

from __future__ import annotations

from django.db import IntegrityError, transaction

from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.rates import rate_take
from agentchat.core.live.push import push_on_commit
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import record_id_check
from channels_app.models import Channel, MarkerClaim
from channels_app.services.direct import direct_channel_refuse
from channels_app.services.groups import ROSTER_GROUP


@write_atomic()
def marker_claim(
    *, channel: Channel, marker: str, owner: str, budgeted: bool = False
) -> MarkerClaim:
    """Exactly one agent claims a marker; the unique row decides. ``budgeted`` (an agent's
    request): a claim takes one from the owner's post budget, given back when it fails.
    Raises INVALID_NAME, CHANNEL_DIRECT (a direct channel has no markers), RATE_LIMITED,
    MARKER_ALREADY_CLAIMED."""
    direct_channel_refuse(channel, "marker claims")
    record_id_check(
        marker, what="marker", code="INVALID_NAME", max_length=128, detail={"field": "marker"}
    )
    existing = MarkerClaim.objects.filter(channel=channel, marker=marker).first()
    if existing is None:
        try:
            with transaction.atomic():
                if budgeted:
                    rate_take(agent=owner)
                claim = MarkerClaim.objects.create(channel=channel, marker=marker, owner=owner)
                push_on_commit(ROSTER_GROUP, {"kind": "marker.claimed", "channel": channel.pk})
                return claim
        except IntegrityError:
            existing = MarkerClaim.objects.get(channel=channel, marker=marker)
    raise AppError(
        "MARKER_ALREADY_CLAIMED",
        f"marker {marker!r} is already claimed by {existing.owner}",
        detail={"marker": marker, "owner": existing.owner},
    )
