"""The dashboard's pages of long texts, within the page's byte budget
(``agentchat.dashboard.budget``): one whole message, its body in parts when it is bigger than
the budget, and the channel's state summary, its long texts shortened to excerpts that link to
their messages."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from agentchat.core.db.heavy import budget_check
from agentchat.core.identity.humans import SignedInRequest
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import int_parse
from agentchat.dashboard.budget import Bodies, heavy_page
from agentchat.dashboard.chat import thread_of
from agentchat.dashboard.markdown import markdown_html
from agentchat.dashboard.views import _shown_messages, channel_or_404
from agentchat.state.bounded import Marker, cut_point, summary_shortened, text_cut
from agentchat.state.markdown import state_markdown
from agentchat.state.selectors import latest_snapshot, state_summary
from channels_app import whiteboard
from channels_app.models import Channel
from channels_app.selectors import message_list_among

# A decision's details, a blocker's, a message's evidence: at most this much on the state page.
STATE_TEXT_BYTES = 1024


def body_parts(body: str, limit: int) -> list[str]:
    """``body`` in consecutive parts of at most ``limit`` UTF-8 bytes each (cut at line ends
    where one is near: ``cut_point``); joined, they are the body."""
    parts: list[str] = []
    rest = body
    while True:
        point = cut_point(rest, limit)
        if point is None:
            parts.append(rest)
            return parts
        point = max(point, 1)  # a limit under one character still moves on
        parts.append(rest[:point])
        rest = rest[point:]


@login_required
@require_http_methods(["GET"])
@heavy_page
def message_page(request: SignedInRequest, name: str, seq: int) -> HttpResponse:
    """One message whole (what an excerpt links to); a body bigger than the page's budget in
    parts (``?part=2``), each within it; and its thread (``chat.thread_of``): the messages it
    answers, up the reply chain, and the replies to it, as excerpts within a budget of their
    own."""
    agent, channel = channel_or_404(request, name)
    found = message_list_among(channel=channel, seqs=[seq])
    if not found:
        raise Http404(f"no message #{seq} in {name!r}")
    message = found[0]
    limit = settings.AGENTCHAT_PAGE_MAX_BYTES
    parts = body_parts(message.body, limit)
    try:
        part = int_parse(
            request.GET.get("part"),
            field="part",
            code="INVALID_VALUE",
            minimum=1,
            maximum=len(parts),
            default=1,
        )
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    size = len(message.body)
    message.body = parts[part - 1]  # shown, never saved
    item = _shown_messages(agent, channel, [message], Bodies(limit, each=limit))[0]
    ancestors, replies, replies_cut = thread_of(channel, message)
    thread = Bodies(limit // 4)  # the thread's excerpts, beside the message's budget
    return render(
        request,
        "dashboard/message.html",
        {
            "agent": agent,
            "channel": channel,
            "messages": [item],
            "m": message,
            "size": size,
            "part": part,
            "parts": len(parts),
            "previous": part - 1 if part > 1 else None,
            "next": part + 1 if part < len(parts) else None,
            "ancestors": _shown_messages(agent, channel, ancestors, thread),
            "replies": _shown_messages(agent, channel, replies, thread),
            "replies_cut": replies_cut,
        },
    )


def _page_marker(channel: str) -> Marker:
    def marker(seq: int | None, characters: int) -> str:
        if seq is None:
            return f" … *(shortened: {characters:,} characters in all)*"
        url = reverse("dashboard:message", args=[channel, seq])
        return (
            f" … *(an excerpt of {characters:,} characters: [the whole message #{seq:04d}]({url}))*"
        )

    return marker


@login_required
@require_http_methods(["GET"])
@heavy_page
def channel_state(request: SignedInRequest, name: str) -> HttpResponse:
    """The derived state summary of the channel, rendered (and when it was last compacted):
    long texts as excerpts linking to their messages, and at most AGENTCHAT_PAGE_MAX_BYTES of
    it, the page saying where it stops."""
    agent, channel = channel_or_404(request, name)
    summary = state_summary(channel=channel)
    snapshot = latest_snapshot(channel)
    budget_check()
    shortened, excerpts = summary_shortened(
        summary, limit=STATE_TEXT_BYTES, marker=_page_marker(channel.name)
    )
    markdown = state_markdown(shortened)
    limit = settings.AGENTCHAT_PAGE_MAX_BYTES
    head = text_cut(markdown, limit)
    over = None
    if head is not None:
        over = {"total": len(markdown.encode("utf-8")), "shown": len(head.encode("utf-8"))}
        markdown = head
    budget_check()
    return render(
        request,
        "dashboard/state.html",
        {
            "agent": agent,
            "channel": channel,
            "tab": "state",
            "html": mark_safe(markdown_html(markdown)),  # sanitized by nh3
            "snapshot": snapshot,
            "excerpts": excerpts,
            "over": over,
            "limit": limit,
            "whiteboard": _shown_whiteboard(channel),
        },
    )


# A whiteboard value is shown up to this many characters (a value may be 64 KiB, a channel's
# whiteboard 1 MiB: more than a page's budget).
WHITEBOARD_SHOWN_CHARACTERS = 4096


def _shown_whiteboard(channel: Channel) -> list[dict[str, Any]]:
    """The channel's whiteboard entries (EP-0118) for the state page: each value as indented
    JSON text (escaped by the template), cut to WHITEBOARD_SHOWN_CHARACTERS, who wrote it and
    when."""
    shown = []
    for entry in whiteboard.entries_of(channel):
        value = json.dumps(json.loads(entry.value_json), ensure_ascii=False, indent=2)
        if len(value) > WHITEBOARD_SHOWN_CHARACTERS:
            value = value[:WHITEBOARD_SHOWN_CHARACTERS] + f" … ({len(value):,} characters in all)"
        shown.append(
            {
                "key": entry.key,
                "value": value,
                "updated_by": entry.updated_by,
                "updated_at": entry.updated_at,
                "audit_seq": entry.audit_seq,
            }
        )
    return shown
