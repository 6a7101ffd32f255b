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
