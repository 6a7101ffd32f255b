"""Reads of the floor's own tables (agents) for the roof: the dashboard looks agents up here,
not in the tables."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.core.rules.presence import presence_status


def agent_name_for_user(user: Any) -> str | None:
    """The name of the agent linked to this signed-in user, or None."""
    return Agent.objects.filter(user=user).values_list("name", flat=True).first()


def agent_list_by_name(*, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` agents by name, each as its ``name``, ``kind`` and ``harness``, and
    its registration (EP-0118) when it has one: ``presence`` (active, idle, sleeping or stale),
    ``heartbeat_at`` (its last heartbeat), ``registered_harness``, ``substrate``; a registered
    harness wins over the agent's own."""
    rows = Agent.objects.order_by("name").select_related("registration")[:limit]
    now = clock.now()
    stale_seconds = float(settings.AGENTCHAT_STALE_SECONDS)
    listed: list[dict[str, Any]] = []
    for agent in rows:
        item: dict[str, Any] = {"name": agent.name, "kind": agent.kind, "harness": agent.harness}
        registration = getattr(agent, "registration", None)
        if registration is not None:
            item.update(
                presence=presence_status(
                    registration.status,
                    registration.last_heartbeat,
                    now=now,
                    stale_seconds=stale_seconds,
                ),
                heartbeat_at=registration.last_heartbeat,
                registered_harness=registration.harness,
                substrate=registration.substrate,
            )
        listed.append(item)
    return listed
