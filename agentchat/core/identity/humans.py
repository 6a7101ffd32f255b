"""The agent identity of a signed-in person (the dashboard and the
admin act as it, so what a person posts says ``sender_kind: human``): a human agent linked
one-to-one to the Django user, made on first sign-in and named after the username (lowercased,
every character outside ``[a-z0-9._-]`` replaced by ``-``, runs of dots made one, trimmed to
the agent-name rule). An existing agent is never linked implicitly: when the name is taken, the
person is ``<name>.human`` (then ``<name>.human-2``, ...)."""

from __future__ import annotations

import re

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.http import HttpRequest

from agentchat.core.db.transactions import write_atomic
from agentchat.core.models import Agent
from agentchat.core.rules.names import is_agent_name

NAME_MAX = 64
_OUTSIDE = re.compile(r"[^a-z0-9._-]")
_EDGES = re.compile(r"^[._-]+|[._-]+$")
_DOTS = re.compile(r"\.{2,}")
HUMAN_SUFFIX = ".human"


def human_name(username: str, *, user_id: int) -> str:
    """The agent name a username becomes (``user-<id>`` when nothing of it is left)."""
    spelled = _DOTS.sub(".", _OUTSIDE.sub("-", username.lower()))
    cut = _EDGES.sub("", spelled[: NAME_MAX - len(HUMAN_SUFFIX) - 4])
    return cut if is_agent_name(cut) else f"user-{user_id}"


def _candidates(base: str) -> list[str]:
    return [base, f"{base}{HUMAN_SUFFIX}", *(f"{base}{HUMAN_SUFFIX}-{n}" for n in range(2, 100))]


class SignedInRequest(HttpRequest):
    """The type of a request behind ``login_required``: its user is a signed-in User (Django
    builds a plain HttpRequest; views annotate their request with this)."""

    user: User


def human_agent(user: User) -> Agent:
    """The human agent of ``user``, made on first use."""
    linked = Agent.objects.filter(user=user).first()
    if linked is not None:
        return linked
    with write_atomic():
        linked = Agent.objects.filter(user=user).first()  # a concurrent first sign-in
        if linked is not None:
            return linked
        for name in _candidates(human_name(user.get_username(), user_id=user.pk)):
            if Agent.objects.filter(name=name).exists():
                continue
            try:
                with transaction.atomic():
                    return Agent.objects.create(
                        name=name,
                        kind=Agent.Kind.HUMAN,
                        user=user,
                        display_name=user.get_username(),
                    )
            except IntegrityError:
                continue
    raise RuntimeError(f"no free agent name for user {user.pk}")  # 100 taken: not reachable
