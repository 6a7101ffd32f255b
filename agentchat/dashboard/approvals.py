"""The dashboard's approvals page (`/approvals/`) and a person's answer to one request:
pending approval requests where the signed-in person may decide, paged by an opaque cursor."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from agentchat.core.identity.humans import SignedInRequest, human_agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import is_agent_name
from agentchat.dashboard.budget import Bodies, heavy_page
from agentchat.dashboard.views import PAGE_MESSAGES, body_shown, channel_or_404
from channels_app import services
from channels_app.approval_rule import (
    may_decide,
    same_namespace,
)
from channels_app.approvals import approval_cursor, approvals_pending
from channels_app.selectors import (
    approval_request_find,
)

ANSWER_TITLES = {"approved": "Approved", "rejected": "Rejected"}


@login_required
@require_http_methods(["GET"])
@heavy_page
def approvals(request: SignedInRequest) -> HttpResponse:
    """The pending approval requests across the channels I may see (or of ``?channel=``), each
    with Approve and Reject (and an optional comment), a page at a time (``?after=``, the
    previous page's cursor)."""
    agent = human_agent(request.user)
    channel = None
    if "channel" in request.GET:
        agent, channel = channel_or_404(request, request.GET["channel"])
    try:
        pending, more = approvals_pending(
            viewer=agent.name,
            limit=PAGE_MESSAGES * 4,
            channel=channel,
            after=request.GET.get("after") or None,
        )
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    shown = []
    bodies = Bodies()
    for message in pending:
        shown.append(
            {
                "m": message,
                **body_shown(message, bodies),
                "maintainer": message.channel.maintainer,
                "decides": may_decide(
                    agent.name,
                    agent.kind,
                    request_sender=message.sender,
                    maintainer=message.channel.maintainer,
                ),
                "own": same_namespace(message.sender, agent.name),  # or a sub-agent's
            }
        )
    return render(
        request,
        "dashboard/approvals.html",
        {
            "agent": agent,
            "pending": shown,
            "more": more,
            "next": approval_cursor(pending[-1]) if more and pending else None,
            "channel": channel,
            "budget_used": bodies.used_up,
        },
    )


@login_required
@require_http_methods(["POST"])
def approval_answer(request: SignedInRequest, name: str, seq: int) -> HttpResponse:
    """Approve or reject request #seq: a reply from me with status ``approved`` or
    ``rejected`` (and the comment as its body), which wakes the requester like any message."""
    agent, channel = channel_or_404(request, name)
    decision = request.POST.get("decision", "")
    try:
        if decision not in ANSWER_TITLES:
            raise AppError(
                "INVALID_VALUE",
                "decision must be approved or rejected",
                detail={"field": "decision"},
            )
        asked = approval_request_find(channel=channel, seq=seq)
        if asked is None:
            raise AppError("INVALID_SEQ", f"#{seq} is no approval request", detail={"seq": seq})
        title = f"{ANSWER_TITLES[decision]}: {asked.title}"[: services.TITLE_MAX]
        services.message_post(
            channel=channel,
            sender=agent.name,
            sender_kind=agent.kind,
            title=title,
            body=request.POST.get("comment", ""),
            to=[asked.sender] if is_agent_name(asked.sender) and asked.sender != agent.name else [],
            reply_to=seq,
            status=decision,
        )
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    return redirect("dashboard:approvals")
