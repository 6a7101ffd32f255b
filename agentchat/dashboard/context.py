"""What every dashboard page's navigation shows: the count of pending approvals."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from agentchat.core.identity.selectors import agent_name_for_user
from channels_app.approvals import approvals_pending_count


def navigation(request: HttpRequest) -> dict[str, Any]:
    match = getattr(request, "resolver_match", None)
    user = getattr(request, "user", None)
    if match is None or match.namespace != "dashboard" or user is None:
        return {}
    if not user.is_authenticated:
        return {}
    name = agent_name_for_user(user)
    return {"pending_approvals": approvals_pending_count(viewer=name) if name else 0}
