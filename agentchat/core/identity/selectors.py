"""Reads of the floor's own tables (agents) for the roof: the dashboard looks agents up here,
not in the tables."""

from __future__ import annotations

from typing import Any

from agentchat.core.models import Agent


def agent_name_for_user(user: Any) -> str | None:
    """The name of the agent linked to this signed-in user, or None."""
    return Agent.objects.filter(user=user).values_list("name", flat=True).first()


def agent_list_by_name(*, limit: int) -> list[dict[str, Any]]:
    """The first ``limit`` agents by name, each as its ``name``, ``kind`` and ``harness``."""
    rows = Agent.objects.order_by("name").values("name", "kind", "harness")[:limit]
    return [dict(row) for row in rows]
