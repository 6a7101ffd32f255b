"""The channel row lock: how every mutation of a channel's messages, tasks, locks, members or
state summary serialises with the others on PostgreSQL.

The row the audit message must lock anyway to allocate its seq is the one lock every writer of
a channel takes first, so writers of one channel see each other's committed state (a
dependency graph, a lock's conflicts, an audit's "before"). SQLite ignores FOR UPDATE; there
``write_atomic`` already runs one writer at a time.
"""

from __future__ import annotations

from channels_app.models import Channel


def channel_lock(channel: Channel) -> Channel | None:
    """Lock ``channel``'s row until the transaction ends; returns the row as it is now
    (None: it was deleted meanwhile). Call inside ``write_atomic()``."""
    return Channel.objects.select_for_update().filter(pk=channel.pk).first()
