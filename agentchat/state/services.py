"""Compaction: store the summary and post its ``state.compacted`` audit, in one transaction
(REFERENCE-CLI §3.13-3.14). It never deletes, edits or truncates anything: messages, tasks,
leases, locks and cursors stay as they are; a snapshot row is only ever added.
"""

from __future__ import annotations

from django.utils import timezone

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules.records import ts_seconds
from agentchat.models import StateSnapshot
from agentchat.state.markdown import state_markdown
from agentchat.state.messages import MessageFold, message_views
from agentchat.state.selectors import messages_folded
from agentchat.state.summary import summary_build, summary_counts
from channels_app.locking import channel_lock
from channels_app.models import Channel
from channels_app.selectors import channel_not_found, channel_visible
from channels_app.services import audit_post

EVENT_COMPACTED = "state.compacted"


def state_compact(*, channel: Channel, actor: str, strict: bool = False) -> StateSnapshot:
    """Compact ``channel`` as ``actor``: the summary up to the channel's last message, its
    markdown as the reference writes ``state.md``, stored as a snapshot, and a broadcast
    ``state.compacted`` audit from ``actor`` whose payload is ``blockers_count, channel,
    compacted_at, decisions_count, event, last_seq, open_tasks_count, path_locks_count`` (the
    ``last_seq`` before the audit, so the folder's ``state.md`` says one less than its last
    message, as the reference's does).

    The channel's messages are folded first, outside the write transaction (from the latest
    compaction's fold on: only what was posted since); inside it (the channel row locked, so
    no post can come between) only those posted meanwhile are added, then the tasks and locks
    are read, so writers wait for a bounded part of the work. The snapshot keeps the fold.
    Raises CHANNEL_NOT_FOUND (``actor`` may no longer see the channel),
    STATE_MALFORMED_SOURCE (strict mode)."""
    # Outside any transaction: the fold may store checkpoints as it goes.
    fold = messages_folded(channel, strict=strict)
    return _compact_commit(channel=channel, actor=actor, fold=fold, strict=strict)


@write_atomic()
def _compact_commit(
    *, channel: Channel, actor: str, fold: MessageFold, strict: bool
) -> StateSnapshot:
    locked = channel_lock(channel)
    if locked is None or not channel_visible(locked, actor):
        raise channel_not_found(channel.name)
    fold.feed_all(message_views(locked, after=fold.last_seq))
    if strict:
        fold.strict_check()
    now = timezone.now()
    summary = summary_build(channel=locked, fold=fold, generated_at=now)
    payload = {
        "event": EVENT_COMPACTED,
        "channel": locked.name,
        **summary_counts(summary),
        "last_seq": summary["last_seq"],
        "compacted_at": ts_seconds(now),
    }
    audit = audit_post(
        channel=locked, actor=actor, event=EVENT_COMPACTED, subject=None, payload=payload, ts=now
    )
    return StateSnapshot.objects.create(
        channel=locked,
        last_seq=summary["last_seq"],
        markdown=state_markdown(summary),
        summary=summary,
        compacted_at=now,
        compacted_by=actor,
        audit_seq=audit.seq,
        fold=fold.state(),
    )
