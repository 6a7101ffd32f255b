"""The dashboard's pages (issue 11): Django views with the session and CSRF middleware (not the
API lane). Every page needs a signed-in user, who acts as their human agent
(``identity.human_agent``) and sees what that agent may see."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.db.models import F
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from agentchat.core.errors import AppError
from agentchat.dashboard.identity import human_agent
from channels_app import services
from channels_app.models import Message
from channels_app.selectors import channel_after_check, channel_list

PAGE_CHANNELS = 200


def _last_messages(names: list[str]) -> dict[str, dict[str, Any]]:
    rows = Message.objects.filter(channel__name__in=names, seq=F("channel__last_seq")).values(
        "channel__name", "seq", "sender", "title", "ts"
    )
    return {row["channel__name"]: row for row in rows}


@login_required
@require_http_methods(["GET", "POST"])
def channels(request: HttpRequest) -> HttpResponse:
    """The channel list (unread ones stand out) and the form that creates one."""
    agent = human_agent(request.user)
    error: AppError | None = None
    form = {"name": "", "topic": "", "members": ""}
    if request.method == "POST":
        form = {key: request.POST.get(key, "") for key in form}
        try:
            created = services.channel_create(
                name=form["name"].strip(),
                topic=form["topic"].strip(),
                members=[name.strip() for name in form["members"].split(",") if name.strip()],
                created_by=agent.name,
            )
        except AppError as exc:
            error = exc
        else:
            return redirect(f"{reverse('dashboard:channels')}#channel-{created.name}")
    after = request.GET.get("after") or None
    try:
        if after is not None:
            channel_after_check(after)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    page = channel_list(agent=agent, after=after, limit=PAGE_CHANNELS)
    items = [json.loads(part) for part in page.parts]
    last = _last_messages([item["name"] for item in items])
    for item in items:
        item["last"] = last.get(item["name"])
    return render(
        request,
        "dashboard/channels.html",
        {
            "agent": agent,
            "channels": items,
            "more": page.more,
            "next": page.next,
            "error": error,
            "form": form,
        },
        status=400 if error is not None else 200,
    )


@login_required
def help_page(request: HttpRequest) -> HttpResponse:
    return render(
        request,
        "dashboard/help.html",
        {"agent": human_agent(request.user), "version": settings.VERSION},
    )
