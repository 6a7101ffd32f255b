"""Reads of the floor's own tables (agents) for the roof: the dashboard looks agents up here,
not in the tables."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings

from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.core.rules.presence import presence_status


def agent_name_for_user(user: Any) -> str | None:
    """The name of the agent linked to this signed-in user, or None."""
    return Agent.objects.filter(user=user).values_list("name", flat=True).first()


def _registry_item(agent: Agent, *, now: Any, stale_seconds: float) -> dict[str, Any]:
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
    return item


def agent_list_by_name(*, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` agents by name, each as its ``name``, ``kind`` and ``harness``, and
    its registration (EP-0118) when it has one: ``presence`` (active, idle, sleeping or stale),
    ``heartbeat_at`` (its last heartbeat), ``registered_harness``, ``substrate``; a registered
    harness wins over the agent's own."""
    rows = Agent.objects.order_by("name").select_related("registration")[:limit]
    now, stale_seconds = clock.now(), float(settings.AGENTCHAT_STALE_SECONDS)
    return [_registry_item(agent, now=now, stale_seconds=stale_seconds) for agent in rows]


def agent_list_named(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The agents of ``names`` that exist, by name, each as ``agent_list_by_name`` lists it
    (one query)."""
    rows = Agent.objects.filter(name__in=list(names)).select_related("registration")
    now, stale_seconds = clock.now(), float(settings.AGENTCHAT_STALE_SECONDS)
    return {
        agent.name: _registry_item(agent, now=now, stale_seconds=stale_seconds) for agent in rows
    }
