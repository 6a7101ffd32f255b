"""The dashboard's pages: Django views with the session and CSRF middleware (not the
API lane). Every page needs a signed-in user, who acts as their human agent
(``identity.human_agent``) and sees what that agent may see."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, cast
from urllib.parse import quote

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_http_methods

from agentchat.core.identity.humans import SignedInRequest, human_agent
from agentchat.core.identity.selectors import agent_list_by_name
from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.records import ts_parse
from agentchat.core.rules.validation import int_parse
from agentchat.dashboard.budget import Bodies, heavy_page
from agentchat.dashboard.chat import (
    error_json,
    read_state,
    title_from_body,
    title_is_derived,
    wants_json,
)
from agentchat.dashboard.markdown import body_breaks, markdown_html
from agentchat.dashboard.presence import channel_members, presence_nested
from channels_app import services
from channels_app.activity import channels_by_activity
from channels_app.approval_rule import (
    APPROVAL_REQUEST,
    answer_decides,
    is_answer,
)
from channels_app.approvals import approvals_pending_among
from channels_app.models import Channel, Message
from channels_app.presence import presence_seen_by
from channels_app.search import messages_search
from channels_app.selectors import (
    channel_after_check,
    channel_get,
    channel_list,
    cursor_get,
    loop_flags,
    message_first_unread,
    message_last_by_channel,
    message_list_among,
    message_list_before,
    message_peek,
)
from locks_app.selectors import lock_id_check, lock_page
from tasks_app.selectors import task_after_check, task_page, tasks_completed_by

PAGE_CHANNELS = 200


def _last_messages(names: list[str]) -> dict[str, dict[str, Any]]:
    return message_last_by_channel(names)


NAME_WORDS = (
    "A channel name is 1 to 64 letters, digits, dots, hyphens or underscores, and starts with "
    "a letter or a digit: no spaces or other signs."
)


def _form_error(exc: AppError) -> tuple[str, str]:
    """The field of the channel form that ``exc`` is about, and what to say there in words."""
    field = str((exc.detail or {}).get("field") or "name")
    if exc.code == "CHANNEL_EXISTS":
        return "name", f"A channel named {exc.detail['name']} already exists: pick another name."
    if exc.code == "INVALID_NAME" and field == "name":
        return "name", NAME_WORDS if "must match" in exc.message else exc.message.capitalize()
    if field not in ("name", "topic", "members"):
        field = "name"
    return field, exc.message[:1].upper() + exc.message[1:] + "."


@login_required
@require_http_methods(["GET", "POST"])
@heavy_page
def channels(request: SignedInRequest) -> HttpResponse:
    """The channel list by latest activity, PAGE_CHANNELS a page (``?page=2``), or by name
    (``?order=name``, ``?after=``), each with its conversation unread for me, and the form that
    creates one, its errors beside their field in words (``_form_error``)."""
    agent = human_agent(request.user)
    error: AppError | None = None
    errors: dict[str, str] = {}
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
            field, words = _form_error(exc)
            errors[field] = words
        else:
            return redirect("dashboard:channel", created.name)
    after = request.GET.get("after") or None
    by_name = after is not None or request.GET.get("order") == "name"
    try:
        if after is not None:
            channel_after_check(after)
        page = int_parse(
            request.GET.get("page"),
            field="page",
            code="INVALID_VALUE",
            minimum=1,
            maximum=10**4,
            default=1,
        )
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    if by_name:  # every channel, a page at a time by name
        listed = channel_list(agent=agent, after=after, limit=PAGE_CHANNELS, conversation=True)
        items = [json.loads(part) for part in listed.parts]
        more, following = listed.more, f"?order=name&after={quote(listed.next or '')}"
    else:  # by latest activity, ordered and cut in the database (channels_by_activity)
        offset = (page - 1) * PAGE_CHANNELS
        items, more = channels_by_activity(agent, limit=PAGE_CHANNELS, offset=offset)
        following = f"?page={page + 1}"
    last = _last_messages([item["name"] for item in items])
    flags = loop_flags([item["name"] for item in items])
    for item in items:
        item["last"] = last.get(item["name"])
        item["loop"] = flags.get(item["name"])
    return render(
        request,
        "dashboard/channels.html",
        {
            "agent": agent,
            "channels": items,
            "by_name": by_name,
            "more": more,
            "following": following if more else None,
            "error": error,
            "errors": errors,
            "form": form,
        },
        status=400 if error is not None else 200,
    )


@login_required
def help_page(request: SignedInRequest) -> HttpResponse:
    return render(
        request,
        "dashboard/help.html",
        {"agent": human_agent(request.user), "version": settings.VERSION},
    )


PAGE_MESSAGES = 50
FRAGMENT_MESSAGES = 50
FRAGMENT_MORE_HEADER = "AgentChat-More"  # channel.js reads it


def channel_or_404(request: SignedInRequest, name: str) -> tuple[Agent, Channel]:
    agent = human_agent(request.user)
    try:
        return agent, channel_get(name, viewer=agent.name)
    except AppError:
        raise Http404(f"no channel {name!r}") from None


def _seq_param(key: str, source: Any) -> int | None:
    minimum = 1 if key == "reply_to" else 0
    return int_parse(source.get(key), field=key, code="INVALID_SEQ", minimum=minimum)


def body_shown(message: Message, bodies: Bodies) -> dict[str, Any]:
    """How a page shows a body within its byte budget (``Bodies``): ``html`` (a message's
    markdown, rendered) or ``record`` (an audit's or event's JSON, as text) of its excerpt,
    ``cut`` when that is an excerpt, ``omitted`` when the page's budget left no room; ``size``
    its length in characters."""
    taken = bodies.take(message.body)
    shown: dict[str, Any] = {"html": None, "record": None, "cut": False, "omitted": taken is None}
    shown["size"] = len(message.body)
    if taken is not None:
        text, shown["cut"] = taken
        if message.kind == Message.Kind.MESSAGE:
            # Audit and event bodies are JSON records: shown as such, not as markdown.
            html = markdown_html(text, breaks=body_breaks(message.sender_kind))
            shown["html"] = mark_safe(html)  # sanitized by nh3
        else:
            shown["record"] = text
    return shown


QUOTE_CHARACTERS = 280  # of a parent's body, quoted by its reply


def _quote_html(parent: Message) -> str:
    """The start of a parent's body as a reply quotes it: markdown rendered and sanitized as
    bodies are (``markdown_html``), at most QUOTE_CHARACTERS of it (cut at a line end when one
    is near), the rest a click away."""
    if parent.kind != Message.Kind.MESSAGE:
        return ""
    text = parent.body.strip()[: QUOTE_CHARACTERS + 1]
    if len(text) > QUOTE_CHARACTERS:
        line_end = text.rfind("\n", 0, QUOTE_CHARACTERS)
        text = text[: line_end if line_end > QUOTE_CHARACTERS // 2 else QUOTE_CHARACTERS] + " …"
    html = markdown_html(text, breaks=body_breaks(parent.sender_kind))
    return mark_safe(html) if text else ""  # sanitized by nh3


def _shown_messages(
    agent: Agent, channel: Channel, messages: list[Message], bodies: Bodies | None = None
) -> list[dict[str, Any]]:
    """The messages as the page shows them: rendered bodies (excerpts within the page's
    budget: ``body_shown``), the sender's kind, the parent a reply quotes (parents off the
    page are loaded in one query), whether a request for approval is still pending (one
    query), and whether an answer to one decides it or is a comment
    (``approval_rule.answer_decides``)."""
    bodies = bodies or Bodies()
    parents_wanted = {m.reply_to for m in messages if m.reply_to is not None}
    on_page = {m.seq: m for m in messages}
    missing = parents_wanted - on_page.keys()
    parents = dict(on_page)
    if missing:
        parents.update(
            (m.seq, m)
            for m in message_list_among(
                channel=channel,
                seqs=missing,
                fields=("seq", "sender", "sender_kind", "title", "body", "status", "kind"),
            )
        )
    pending = approvals_pending_among(
        channel=channel, seqs=(m.seq for m in messages if m.status == APPROVAL_REQUEST)
    )
    shown = []
    for message in messages:
        parent = parents.get(message.reply_to) if message.reply_to is not None else None
        shown.append(
            {
                "m": message,
                **body_shown(message, bodies),
                "kind": message.sender_kind,
                "relevant": message.is_relevant_to(agent.name),
                "pending": message.seq in pending,
                "answer": (
                    "decision"
                    if answer_decides(message, parent, maintainer=channel.maintainer)
                    else "comment"
                )
                if is_answer(message)
                else None,
                "parent": parent,
                "parent_html": _quote_html(parent) if parent is not None else "",
                "conversation": message.kind == Message.Kind.MESSAGE,
                "title_shown": not title_is_derived(message),
            }
        )
    return shown


UNREAD_CONTEXT = 3  # messages shown above the first unread when a channel opens there


def _read_floor(cursor: int, first_unread: int | None, messages: list[Message]) -> int | None:
    """The seq the page's reading starts after (``channel.js`` moves the cursor to the last
    message seen without a gap after it): the cursor when the page starts at or before the
    first message after it; the message before the page's first when nothing between the
    cursor and the page is unread for me; None (the page moves no cursor) when an unread
    message lies before the page."""
    if not messages or cursor >= messages[0].seq - 1:
        return cursor
    if first_unread is None or first_unread >= messages[0].seq:
        return messages[0].seq - 1
    return None


@login_required
@require_http_methods(["GET"])
@heavy_page
def channel_page(request: SignedInRequest, name: str) -> HttpResponse:
    """A channel's messages: its latest ones, or, when my first unread is older than those,
    from just above it (``?before=`` and ``?after=`` page); the first unread marked, the
    unread counts, a composer. Opening it moves no cursor: the page's script does, as the
    messages are seen (``_read_floor``)."""
    agent, channel = channel_or_404(request, name)
    try:
        before = _seq_param("before", request.GET)
        after = _seq_param("after", request.GET)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    cursor = cursor_get(agent=agent, channel=channel)
    first_unread = message_first_unread(channel=channel, agent=agent, cursor=cursor)
    newer = False
    if after is None:
        messages = message_list_before(channel=channel, before=before, limit=PAGE_MESSAGES)
        if (
            before is None
            and first_unread is not None
            and messages
            and first_unread < messages[0].seq
        ):
            after = max(first_unread - 1 - UNREAD_CONTEXT, 0)  # open at the first unread
    if after is not None:
        # By count only, as the latest page is: bodies are shown within the page's budget.
        page = message_peek(channel=channel, after=after, limit=PAGE_MESSAGES, max_bytes=1 << 62)
        messages, newer = page.messages, page.more
    bodies = Bodies()
    shown = _shown_messages(agent, channel, messages, bodies)
    try:
        members, members_hidden = channel_members(channel=channel, viewer=agent.name)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=404)
    live = before is None and not newer
    return render(
        request,
        "dashboard/channel.html",
        {
            "agent": agent,
            "channel": channel,
            "messages": shown,
            "first_unread": first_unread,
            "first_unread_shown": any(m.seq == first_unread for m in messages),
            "read": read_state(agent, channel),
            "floor": _read_floor(cursor, first_unread, messages),
            "highest": messages[-1].seq if messages else 0,
            "older": messages[0].seq if messages and messages[0].seq > 1 else None,
            "newer": messages[-1].seq if newer and messages else None,
            "live": live,
            "reply_to": request.GET.get("reply_to", ""),
            "budget_used": bodies.used_up,
            "members": members,
            "members_hidden": members_hidden,
            "loop": loop_flags([channel.name]).get(channel.name),
            "refusing": bool(settings.AGENTCHAT_LOOP_GUARD_REFUSE),
        },
    )


@login_required
@require_http_methods(["POST"])
def channel_post(request: SignedInRequest, name: str) -> HttpResponse:
    """Post as me; back to the channel at the new message (the page's script: JSON, 201 with
    the seq, or 400 with the error). An empty title is the body's first line
    (``chat.title_from_body``)."""
    agent, channel = channel_or_404(request, name)
    form = request.POST
    try:
        reply_to = _seq_param("reply_to", form)
        to = [n.strip() for n in form.get("to", "").split(",") if n.strip()]
        body = form.get("body", "")
        title = form.get("title", "").strip() or title_from_body(body)
        if not title:
            raise AppError(
                "INVALID_VALUE",
                "write a message (or a title) first",
                detail={"field": "body"},
            )
        message, _ = services.message_post(
            channel=channel,
            sender=agent.name,
            sender_kind=agent.kind,
            title=title,
            body=body,
            to=to,
            reply_to=reply_to,
            status=form.get("status", "").strip() or "discussion",
        )
    except AppError as exc:
        if wants_json(request):
            return error_json(exc)
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    if wants_json(request):
        return JsonResponse({"seq": message.seq, "title": message.title}, status=201)
    return redirect(f"{reverse('dashboard:channel', args=[channel.name])}#m-{message.seq}")


def _cursor_moved(request: SignedInRequest, agent: Agent, channel: Channel) -> HttpResponse:
    """The answer of a read or unread mark: the read state as JSON to the page's script, else
    back to the channel."""
    if wants_json(request):
        return JsonResponse(read_state(agent, channel))
    return redirect("dashboard:channel", channel.name)


def _cursor_refused(request: SignedInRequest, agent: Agent, exc: AppError) -> HttpResponse:
    if wants_json(request):
        return error_json(exc)
    return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)


@login_required
@require_http_methods(["POST"])
def channel_mark_read(request: SignedInRequest, name: str) -> HttpResponse:
    """Mark read up to ``seq``: the highest seq the page showed ("Mark all read"), or the last
    one seen (the page's script, which gets the read state as JSON); never the channel's max
    unasked, never back."""
    agent, channel = channel_or_404(request, name)
    try:
        seq = _seq_param("seq", request.POST)
        if seq is None:
            raise AppError("INVALID_SEQ", "seq is required", detail={"field": "seq"})
        if seq > cursor_get(agent=agent, channel=channel):
            services.cursor_ack(channel=channel, agent=agent, seq=seq)
    except AppError as exc:
        return _cursor_refused(request, agent, exc)
    return _cursor_moved(request, agent, channel)


@login_required
@require_http_methods(["POST"])
def channel_mark_unread(request: SignedInRequest, name: str) -> HttpResponse:
    """ "Mark unread from here": the cursor back to just before ``seq`` (never forward)."""
    agent, channel = channel_or_404(request, name)
    try:
        seq = _seq_param("seq", request.POST)
        if seq is None or seq < 1:
            raise AppError("INVALID_SEQ", "seq is required", detail={"field": "seq"})
        if seq - 1 < cursor_get(agent=agent, channel=channel):
            services.cursor_ack(channel=channel, agent=agent, seq=seq - 1)
    except AppError as exc:
        return _cursor_refused(request, agent, exc)
    return _cursor_moved(request, agent, channel)


@require_http_methods(["GET"])
@heavy_page
def channel_fragment(request: HttpRequest, name: str) -> HttpResponse:
    """The messages after ``?after=`` as HTML for the live page (what a websocket frame makes it
    fetch: the page never inserts a frame's own body). 403 when not signed in. The header
    ``AgentChat-More: 1`` says the page was cut (by count or by size) and more follow: the page
    fetches again after the last one it got."""
    if not request.user.is_authenticated:
        return HttpResponse("sign in first", status=403, content_type="text/plain")
    agent, channel = channel_or_404(cast(SignedInRequest, request), name)  # signed in
    try:
        after = _seq_param("after", request.GET) or 0
    except AppError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    page = message_peek(channel=channel, after=after, limit=FRAGMENT_MESSAGES)
    response = render(
        request,
        "dashboard/_messages.html",
        {
            "agent": agent,
            "channel": channel,
            "messages": _shown_messages(agent, channel, page.messages),
        },
    )
    response[FRAGMENT_MORE_HEADER] = "1" if page.more else "0"
    return response


BOARD_COLUMNS = {
    "open": "Open",
    "in_progress": "In progress",
    "blocked": "Blocked",
    "done": "Done",
    "cancelled": "Cancelled",
}


def _expiry(text: str | None, now: datetime) -> dict[str, Any] | None:
    if not text:
        return None
    at = ts_parse(text)
    return {"text": text, "at": at, "expired": at is not None and at <= now}


@login_required
@require_http_methods(["GET"])
@heavy_page
def channel_tasks(request: SignedInRequest, name: str) -> HttpResponse:
    """The tasks board: a column per status; owners, leases counting down (expired ones
    flagged), dependencies and what blocks each task; ready tasks stand out."""
    agent, channel = channel_or_404(request, name)
    after = request.GET.get("after") or None
    try:
        if after is not None:
            task_after_check(after)
        page = task_page(channel=channel, after=after)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    now = clock.now()
    columns: dict[str, list[dict[str, Any]]] = {status: [] for status in BOARD_COLUMNS}
    for part in page.parts:
        task = json.loads(part)
        task["expiry"] = _expiry(task["lease_expires_at"], now)
        task["is_ready"] = task["ready"] and task["status"] in ("open", "blocked")
        columns.setdefault(task["status"], []).append(task)
    done = tasks_completed_by(channel=channel, task_ids=[task["id"] for task in columns["done"]])
    for task in columns["done"]:
        task["completed_by"] = done.get(task["id"])
    return render(
        request,
        "dashboard/tasks.html",
        {
            "agent": agent,
            "channel": channel,
            "columns": [
                (status, label, columns[status]) for status, label in BOARD_COLUMNS.items()
            ],
            "more": page.more,
            "next": page.next,
            "tab": "tasks",
        },
    )


@login_required
@require_http_methods(["GET"])
@heavy_page
def channel_locks(request: SignedInRequest, name: str) -> HttpResponse:
    """The channel's path locks, active and expired: owner, paths, expiry."""
    agent, channel = channel_or_404(request, name)
    after = request.GET.get("after") or None
    try:
        page = lock_page(channel=channel, after=lock_id_check(after) if after else None)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": agent, "error": exc}, status=400)
    now = clock.now()
    locks = []
    for part in page.parts:
        lock = json.loads(part)
        lock["expiry"] = _expiry(lock["expires_at"], now)
        locks.append(lock)
    return render(
        request,
        "dashboard/locks.html",
        {
            "agent": agent,
            "channel": channel,
            "locks": locks,
            "more": page.more,
            "next": page.next,
            "tab": "locks",
        },
    )


PRESENCE_ROWS = 5000


@login_required
@require_http_methods(["GET"])
@heavy_page
def agents(request: SignedInRequest) -> HttpResponse:
    """Every agent with its presence across the channels I may see (``presence_seen_by``):
    last active, the latest status event, the latest capabilities; and its registration
    (EP-0118), which a session publishes by registering: status, stale flagged, last
    heartbeat, harness. Nothing else of what an agent did where I may not look (not the
    token's last use, ``Agent.last_seen``)."""
    me = human_agent(request.user)
    latest = presence_seen_by(viewer=me.name, limit=PRESENCE_ROWS)
    people = []
    for item in agent_list_by_name(limit=PRESENCE_ROWS):
        people.append({**item, **latest.pop(item["name"], {})})
    # Not in the registry (an imported sender, say): its messages say "agent" (their stored
    # sender_kind), so this page does too, and says it never registered.
    people += [
        {"name": name, "kind": "agent", "unregistered": True, **seen}
        for name, seen in sorted(latest.items())
    ]
    people = presence_nested(people)
    stale_minutes = f"{settings.AGENTCHAT_STALE_SECONDS / 60:g}"
    return render(
        request,
        "dashboard/agents.html",
        {"agent": me, "people": people, "stale_minutes": stale_minutes},
    )


@login_required
@require_http_methods(["GET"])
@heavy_page
def search_page(request: SignedInRequest) -> HttpResponse:
    """Search messages (title and body) everywhere I may see, or in one channel."""
    agent = human_agent(request.user)
    query = request.GET.get("q", "")
    name = request.GET.get("channel", "")
    context: dict[str, Any] = {"agent": agent, "q": query, "in_channel": name, "results": None}
    if query:
        try:
            channel = channel_get(name, viewer=agent.name) if name else None
            found, more = messages_search(
                viewer=agent.name, query=query, channel=channel, limit=PAGE_MESSAGES
            )
        except AppError as exc:
            context["error"] = exc
            return render(request, "dashboard/search.html", context, status=400)
        bodies = Bodies()
        results = [{"m": message, **body_shown(message, bodies)} for message in found]
        context.update(results=results, more=more, budget_used=bodies.used_up)
    return render(request, "dashboard/search.html", context)
