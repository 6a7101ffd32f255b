"""The roof's one table: the state summaries that compaction stored (CLI "Channel state summary
and compaction"). A summary is derived, never authoritative: compaction appends a row and posts
its ``state.compacted`` audit; nothing else reads or deletes the sources because of it. The
synced folder's ``state.md`` is the channel's latest row, as the reference writes it.
"""

from __future__ import annotations

from django.db import models

from channels_app.models import Channel


class StateSnapshot(models.Model):
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="state_snapshots")
    # The channel's last seq that the summary covers (before its own state.compacted audit).
    last_seq = models.BigIntegerField()
    markdown = models.TextField()
    summary = models.JSONField()
    compacted_at = models.DateTimeField()
    compacted_by = models.CharField(max_length=200)
    # The seq of the state.compacted audit message posted with it.
    audit_seq = models.BigIntegerField()
    # The message fold it was made from (``agentchat.state.messages.MessageFold.state``): the
    # next summary of the channel folds only the messages after ``last_seq`` (messages are
    # immutable). Null, or of another version, means fold the channel from its start.
    fold = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["channel_id", "-id"]
        indexes = [models.Index(fields=["channel", "-id"], name="state_snapshot_latest")]

    def __str__(self) -> str:
        return f"state of {self.channel} at #{self.last_seq}"


class StateFold(models.Model):
    """The channel's message fold as the last summary left it (a checkpoint, one row per
    channel): a summary folds only the messages after ``last_seq`` (messages are immutable),
    so what it costs is what was posted since, not the channel's history. Derived and
    disposable: a missing row, or a fold of another version, is folded again from the latest
    compaction's fold or from the start."""

    channel = models.OneToOneField(Channel, on_delete=models.CASCADE, related_name="state_fold")
    last_seq = models.BigIntegerField()
    fold = models.JSONField()

    def __str__(self) -> str:
        return f"fold of {self.channel} at #{self.last_seq}"
