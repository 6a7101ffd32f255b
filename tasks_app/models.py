"""Tasks, their dependencies, active leases and the lease history (CLI "task" commands).

Invariants the database holds on its own: a task id is unique per channel case-insensitively
(ids become file names in the synced folder); a task has at most one active lease (the
one-to-one row is the claim); a dependency points at an existing task, never at itself, and
is listed once. What spans rows (a leased task is ``in_progress`` and its owner is the lease
owner, dependencies stay inside one channel, no cycles) is kept by ``tasks_app.services``,
which is the only writer.

Timestamps are real timezone-aware datetimes; how the reference spells them in the folder
is decided in one place, ``tasks_app.records``.
"""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Lower

from channels_app.models import Channel

TASK_ID_MAX = 128
OWNER_MAX = 64


class TaskStatus(models.TextChoices):
    OPEN = "open", "open"
    IN_PROGRESS = "in_progress", "in progress"
    BLOCKED = "blocked", "blocked"
    DONE = "done", "done"
    CANCELLED = "cancelled", "cancelled"


class Task(models.Model):
    Status = TaskStatus

    class Spelling(models.TextChoices):
        # The reference writes task create/update times with seconds precision and lease
        # operation times with microseconds; the folder sync must reproduce the same bytes.
        SECONDS = "seconds", "seconds (task create/update)"
        MICROSECONDS = "microseconds", "microseconds (lease operation)"

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="tasks")
    task_id = models.CharField("id", max_length=TASK_ID_MAX)
    title = models.TextField(blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.OPEN)
    # "" is the record's null (an empty owner or branch is invalid anyway).
    owner = models.CharField(max_length=OWNER_MAX, blank=True, default="")
    created_by = models.CharField(max_length=200)
    files_hint = models.JSONField(default=list, blank=True)
    acceptance = models.JSONField(default=list, blank=True)
    branch = models.TextField(blank=True, default="")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    updated_at_spelling = models.CharField(
        max_length=16, choices=Spelling.choices, default=Spelling.SECONDS
    )
    # Times as an imported folder spelled them (``{field: text}``), re-emitted while they still
    # name the stored instant (``agentchat.core.rules.records.ts_spelled``).
    spellings = models.JSONField(default=dict, blank=True)
    # Bumped by every write: services update with ``revision=<read value>`` (compare-and-set).
    revision = models.PositiveIntegerField(default=1)
    # The fencing token (docs/tasks.md "Fencing tokens"): 0 before any claim, one more on every
    # claim and recovery (an agent's, an admin's, a force release), kept by a renew. It only
    # grows, across owners; a mutation carrying an older one is refused (STALE_FENCE).
    fence = models.PositiveBigIntegerField(default=0)
    # Not a field: the dependency links selectors.task_links loaded, kept once loaded.
    links: list[TaskDependency]

    class Meta:
        ordering = ["channel_id", "task_id"]
        constraints = [
            models.UniqueConstraint(Lower("task_id"), "channel", name="task_id_ci_unique"),
            models.CheckConstraint(
                condition=models.Q(status__in=TaskStatus.values),
                name="task_status_valid",
            ),
            models.CheckConstraint(condition=~models.Q(task_id=""), name="task_id_nonempty"),
        ]
        indexes = [models.Index(fields=["channel", "status"], name="task_channel_status")]

    def __str__(self) -> str:
        return self.task_id


class TaskDependency(models.Model):
    """``depends_on`` as rows, in the order given (``position``)."""

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="dependency_links")
    dependency = models.ForeignKey(Task, on_delete=models.PROTECT, related_name="dependent_links")
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["task_id", "position"]
        constraints = [
            models.UniqueConstraint(fields=["task", "dependency"], name="task_dependency_unique"),
            models.UniqueConstraint(fields=["task", "position"], name="task_dependency_position"),
            models.CheckConstraint(
                condition=~models.Q(task=models.F("dependency")), name="task_dependency_not_self"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task} -> {self.dependency}"


class Lease(models.Model):
    """The active claim of a task (the reference's ``claims/<task>.<owner>.json``).

    An expired lease stays until it is recovered: it is never taken over silently.
    """

    task = models.OneToOneField(Task, on_delete=models.CASCADE, related_name="lease")
    owner = models.CharField(max_length=OWNER_MAX)
    lease_expires_at = models.DateTimeField(db_index=True)
    claimed_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    # "" is the record's null.
    previous_owner = models.CharField(max_length=OWNER_MAX, blank=True, default="")
    previous_lease_expires_at = models.DateTimeField(null=True, blank=True)
    recovery_reason = models.TextField(blank=True, default="")
    # Times as an imported folder spelled them (``{field: text}``), re-emitted while they still
    # name the stored instant (``agentchat.core.rules.records.ts_spelled``).
    spellings = models.JSONField(default=dict, blank=True)
    # The task's fence this lease was granted under (``Task.fence`` at its claim or recovery).
    fence = models.PositiveBigIntegerField(default=0)

    class Meta:
        ordering = ["lease_expires_at"]
        constraints = [
            models.CheckConstraint(condition=~models.Q(owner=""), name="lease_owner_nonempty"),
            models.CheckConstraint(
                condition=models.Q(lease_expires_at__gte=models.F("claimed_at")),
                name="lease_expiry_after_claim",
            ),
            # A recovered lease records all three, a claimed one none.
            models.CheckConstraint(
                condition=(
                    models.Q(
                        previous_owner="",
                        previous_lease_expires_at__isnull=True,
                        recovery_reason="",
                    )
                    | (
                        models.Q(previous_lease_expires_at__isnull=False)
                        & ~models.Q(previous_owner="")
                        & ~models.Q(recovery_reason="")
                    )
                ),
                name="lease_recovery_fields_together",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task} leased by {self.owner}"


class LeaseHistory(models.Model):
    """One row per lease operation; append-only."""

    class Event(models.TextChoices):
        CLAIMED = "lease.claimed", "claimed"
        RENEWED = "lease.renewed", "renewed"
        RELEASED = "lease.released", "released"
        COMPLETED = "lease.completed", "completed"
        RECOVERED = "lease.recovered", "recovered"
        # The admin's break-glass: ``actor`` is the admin, ``recovery_reason`` the reason.
        FORCE_RELEASED = "lease.force_released", "force-released"

    task = models.ForeignKey(Task, on_delete=models.CASCADE, related_name="lease_history")
    event = models.CharField(max_length=32, choices=Event.choices)
    at = models.DateTimeField()
    actor = models.CharField(max_length=200)
    # The lease owner after the event (for released/completed: the owner that let it go).
    owner = models.CharField(max_length=OWNER_MAX)
    # The expiry after the event; null once released or completed.
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    previous_owner = models.CharField(max_length=OWNER_MAX, blank=True, default="")
    previous_lease_expires_at = models.DateTimeField(null=True, blank=True)
    recovery_reason = models.TextField(blank=True, default="")
    transaction_id = models.CharField(max_length=32)

    class Meta:
        ordering = ["task_id", "id"]
        verbose_name_plural = "lease history"

    def __str__(self) -> str:
        return f"{self.event} {self.task} ({self.owner})"
