"""Workspace path locks (REFERENCE-CLI §3.9): one record per lock, one row per locked path."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from channels_app.models import Channel


class PathLock(models.Model):
    """A lock over one or more workspace paths, held by ``owner`` until ``expires_at``.

    An expired lock stays until its owner unlocks it or someone recovers it; recovery keeps the
    lock id and paths and records the previous owner, expiry and the reason (all three or none).
    """

    lock_id = models.CharField(max_length=64, db_index=True)  # uuid4().hex when created here
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="path_locks")
    owner = models.CharField(max_length=64, db_index=True)
    expires_at = models.DateTimeField(db_index=True)
    locked_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # NULL, not "", means "never recovered", as null does in the reference's record; the
    # three are set together (constraint below).
    previous_owner = models.CharField(max_length=64, null=True, blank=True)  # noqa: DJ001
    previous_expires_at = models.DateTimeField(null=True, blank=True)
    recovery_reason = models.TextField(null=True, blank=True)  # noqa: DJ001
    # Times as an imported folder spelled them (``{field: text}``), re-emitted while they still
    # name the stored instant (``agentchat.core.rules.records.ts_spelled``).
    spellings = models.JSONField(default=dict, blank=True)
    # The fencing token (docs/locks.md "Fencing tokens"): handed out by the channel's
    # ``LockFence`` on the acquisition and on every recovery, so it only grows per lock (and
    # per path: a later lock on the same path gets a later fence).
    fence = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["channel_id", "lock_id"]
        verbose_name = "path lock"
        constraints = [
            models.UniqueConstraint(fields=["channel", "lock_id"], name="path_lock_id_unique"),
            models.CheckConstraint(
                condition=(
                    Q(
                        previous_owner__isnull=True,
                        previous_expires_at__isnull=True,
                        recovery_reason__isnull=True,
                    )
                    | Q(
                        previous_owner__isnull=False,
                        previous_expires_at__isnull=False,
                        recovery_reason__isnull=False,
                    )
                ),
                name="path_lock_recovery_all_or_none",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.lock_id} ({self.owner})"


class PathLockEntry(models.Model):
    """One path of a lock. ``channel`` repeats the lock's channel so that the database itself
    refuses two locks on the same normalized path of a channel (a backstop: overlap is decided
    by ``locks_app.globs`` under the channel's write serialization).

    ``index_key`` is ``<channel id>:<anchor>``, the anchor being the path's literal prefix
    (``locks_app.globs.literal_anchor``: the path itself when it has no pattern, ``.`` for a
    leading pattern), and ``index_key_folded`` the same of the case-folded path: the keys the
    conflict lookup probes (``locks_app.conflicts``), since an entry can only overlap entries
    whose anchor is an ancestor of, equal to, or below its own. Indexed with
    ``text_pattern_ops`` on PostgreSQL, whose collations do not order text by code point, so
    that a prefix range (``~>=~`` / ``~<~``) uses the index there; SQLite compares bytewise.
    """

    class Kind(models.TextChoices):
        FILE = "file", "file"
        DIRECTORY = "directory", "directory"

    lock = models.ForeignKey(PathLock, on_delete=models.CASCADE, related_name="entries")
    # No index of its own: the unique (channel, path) index starts with it, and a second
    # channel-only index would only be one more a planner could pick for a key probe.
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="+", db_index=False)
    position = models.PositiveSmallIntegerField()
    normalized_path = models.CharField(max_length=1024)
    display_path = models.CharField(max_length=1024)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.FILE)
    # No default: every writer sets both (``locks_app.paths.entry_index_keys``); an entry
    # without its keys would never conflict.
    index_key = models.TextField()
    index_key_folded = models.TextField()

    class Meta:
        ordering = ["lock_id", "position"]
        verbose_name = "locked path"
        indexes = [
            models.Index(
                fields=["index_key"], name="path_lock_entry_key", opclasses=["text_pattern_ops"]
            ),
            models.Index(
                fields=["index_key_folded"],
                name="path_lock_entry_key_folded",
                opclasses=["text_pattern_ops"],
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["channel", "normalized_path"], name="path_lock_entry_path_unique"
            ),
            models.UniqueConstraint(
                fields=["lock", "position"], name="path_lock_entry_position_unique"
            ),
        ]

    def __str__(self) -> str:
        return self.normalized_path


class LockFence(models.Model):
    """The last fence handed out to a path lock of the channel: lock rows are deleted on
    release, so the counter lives here, one row per channel, taken with one
    ``INSERT … ON CONFLICT … DO UPDATE … RETURNING`` inside the acquisition's transaction
    (``locks_app.services.lock_fence_take``)."""

    channel = models.OneToOneField(
        Channel, on_delete=models.CASCADE, primary_key=True, related_name="lock_fence"
    )
    last_fence = models.PositiveBigIntegerField(default=0)

    class Meta:
        verbose_name = "path lock fence"

    def __str__(self) -> str:
        return f"{self.channel_id}: {self.last_fence}"
