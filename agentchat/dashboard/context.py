"""What every dashboard page's navigation shows: the count of pending approvals.

Every page runs it, the light ones too (help, sign-in's redirect target), outside the heavy
gate: so it must stay cheap and bounded whatever the channels hold. The count reads the
approvals' covering indexes only (``channels_app.approvals``), stops at APPROVALS_MAX + 1, and
runs within a work budget of its own (NAV_BUDGET_SECONDS) where the page has none: past it the
badge is left out (``pending_approvals`` None) and the page is shown anyway."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from agentchat.core.db.heavy import budget_active, work_budget
from agentchat.core.identity.selectors import agent_name_for_user
from agentchat.core.rules.errors import AppError
from channels_app.approvals import approvals_pending_count

# The navigation's count takes at most this long on a page without a work budget (a heavy
# page's count is within the page's own budget).
NAV_BUDGET_SECONDS = 0.25


def pending_count(name: str) -> int | None:
    """``name``'s pending approvals for the badge; None when counting ran out of its budget."""
    if budget_active():
        return approvals_pending_count(viewer=name)
    try:
        with work_budget(NAV_BUDGET_SECONDS):
            return approvals_pending_count(viewer=name)
    except AppError as exc:
        if exc.code != "WORK_BUDGET_EXCEEDED":
            raise
        return None


def navigation(request: HttpRequest) -> dict[str, Any]:
    match = getattr(request, "resolver_match", None)
    user = getattr(request, "user", None)
    if match is None or match.namespace != "dashboard" or user is None:
        return {}
    if not user.is_authenticated:
        return {}
    name = agent_name_for_user(user)
    return {"pending_approvals": pending_count(name) if name else 0}
