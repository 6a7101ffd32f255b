"""Identity: agents and their API tokens."""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

TOKEN_PREFIX = "ac_"


def token_digest(raw: str) -> str:
    # Tokens are 256 random bits, so a plain SHA-256 is a safe at-rest form (no password KDF).
    return hashlib.sha256(raw.encode("utf-8", "surrogatepass")).hexdigest()


def token_generate() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


class Agent(models.Model):
    class Kind(models.TextChoices):
        AGENT = "agent", "agent"
        HUMAN = "human", "human"

    name = models.CharField(max_length=64, unique=True)
    display_name = models.CharField(max_length=200, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.AGENT)
    harness = models.CharField(max_length=100, blank=True)
    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    # DRF treats request.user as a user-like object.
    @property
    def is_authenticated(self) -> bool:
        return True


class ApiToken(models.Model):
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="tokens")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    # The first characters, shown in the admin so a token can be recognised without storing it.
    hint = models.CharField(max_length=12, editable=False)
    label = models.CharField(max_length=100, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.hint}… ({self.agent.name})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class Registration(models.Model):
    """An agent's place in the registry (EP-0118 §1, §4): the session that registered as it,
    what runs it, whether it is still at work, and when it was last heard from.

    One per agent, its primary key: a second session registering as the same agent while this
    one is live is refused; over a stale or idle one it takes the row over (a new run token,
    a new ``joined_at``). The run token is stored as its digest only. ``last_heartbeat`` moves
    on every authenticated request of the agent (at most once per AGENTCHAT_HEARTBEAT_SECONDS,
    ``agentchat.core.identity.registry``); ``stale`` is no stored status but read from it
    (silent past AGENTCHAT_STALE_SECONDS). ``session`` names the channel the EP's session is
    ("": none), whose registrations the idle handshake counts.
    """

    class Status(models.TextChoices):
        ACTIVE = "active", "active"
        IDLE = "idle", "idle"
        SLEEPING = "sleeping", "sleeping"

    agent = models.OneToOneField(
        Agent, on_delete=models.CASCADE, primary_key=True, related_name="registration"
    )
    harness = models.CharField(max_length=100)
    substrate = models.CharField(max_length=100, blank=True, default="")
    run_token_digest = models.CharField(max_length=64, editable=False)
    session = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    note = models.TextField(blank=True, default="")  # what the agent said going idle
    joined_at = models.DateTimeField()
    status_at = models.DateTimeField()
    last_heartbeat = models.DateTimeField()

    class Meta:
        ordering = ["agent_id"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(status__in=["active", "idle", "sleeping"]),
                name="registration_status_known",
            ),
        ]
        indexes = [
            # The idle handshake counts a session's active registrations by heartbeat.
            models.Index(fields=["session", "status", "last_heartbeat"], name="registration_live"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}: {self.status}"


class RateBucket(models.Model):
    """A token bucket of posts (``agentchat.core.identity.rates``), one per top-level agent
    (its sub-agents share it): ``tokens`` left as of ``stamp`` (seconds since the epoch). Taken
    from by a conditional UPDATE in the posting transaction, so a refused or rolled-back post
    costs nothing and every process counts against the same row."""

    name = models.CharField(max_length=64, primary_key=True)
    tokens = models.FloatField()
    stamp = models.FloatField()

    def __str__(self) -> str:
        return f"{self.name}: {self.tokens:.1f}"
