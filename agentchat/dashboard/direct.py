"""The dashboard's pages of HTTP v1 direct messages: a person's conversations (by peer), one
pair's envelopes grouped by ``conversation_id`` with the receipts on the messages they answer,
live (the pair's direct channel's websocket makes the page fetch ``direct_fragment``), a form
that sends an envelope as the person's human agent (``services.envelope_send``), a receipt
button, and for staff the admin monitor (every inbox fanned in, read-only).

A direct message is a message of the pair's members-only direct channel, so what a person may
see here is what their agent may see there: only their own pairs.
"""

from __future__ import annotations

import json
from typing import Any, cast

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from agentchat.core.identity.humans import SignedInRequest, human_agent
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import is_agent_name
from agentchat.core.rules.validation import int_parse
from agentchat.dashboard.budget import Bodies, excerpt, heavy_page
from agentchat.dashboard.views import body_shown
from channels_app import services
from channels_app.conversations import (
    direct_channel_of,
    direct_conversations,
    direct_messages_after,
    direct_messages_before,
    direct_peer_exists,
    direct_receipts_for,
    receipt_fields,
)
from channels_app.envelopes import (
    envelope_to_dict,
    monitor_cursor_decode,
    thread_id_check,
)
from channels_app.models import Channel, Delivery, Message
from channels_app.monitor import MonitorPage, monitor_page
from channels_app.selectors import cursor_get, message_unread_count

PAGE_CONVERSATIONS = 200
PAGE_ENVELOPES = 50
FRAGMENT_ENVELOPES = 50
MONITOR_PAGE = 50
TAILS_SHOWN = 200  # the monitor page lists this many inboxes' tails
# The data, metadata and a monitor text shown on a page: at most this many characters each.
SHOWN_JSON_CHARACTERS = 4096
FRAGMENT_MORE_HEADER = "AgentChat-More"
FRAGMENT_LAST_HEADER = "AgentChat-Last"  # the highest seq the fragment looked at
FORM_FIELDS = ("to", "conversation_id", "correlation_id", "text", "content_type", "data")
RECEIPT_STATUSES = ("read", "processed", "delivered", "rejected")


def _json_text(value: Any, *, limit: int = SHOWN_JSON_CHARACTERS) -> str:
    text = json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)
    if len(text) > limit:
        return text[:limit] + f" … ({len(text):,} characters in all)"
    return text


def _peer_or_404(me: Agent, peer: str) -> tuple[str, Channel | None]:
    """The peer named in the path (an existing agent) and the pair's channel (None before the
    pair's first envelope). 404 for a name that is no agent's."""
    if not is_agent_name(peer) or not direct_peer_exists(peer):
        raise Http404(f"no agent {peer!r}")
    return peer, direct_channel_of(agent=me.name, peer=peer)


def _conversation_param(request: HttpRequest) -> str | None:
    raw = request.GET.get("conversation") or None
    return thread_id_check(raw, field="conversation") if raw is not None else None


def _envelope_shown(message: Message, bodies: Bodies) -> dict[str, Any]:
    """One envelope as a page shows it: the message (body within the page's budget), its
    envelope (``envelopes.envelope_to_dict``: the kind, ids, the time), its data and metadata as
    JSON text, its receipts (set by the caller)."""
    delivery = cast(Delivery | None, getattr(message, "delivery", None))
    envelope = envelope_to_dict(delivery, message) if delivery is not None else None
    shown = body_shown(message, bodies) if message.body else {"html": None, "omitted": False}
    return {
        "m": message,
        **shown,
        "envelope": envelope,
        "kind": envelope["kind"] if envelope else message.status,
        "data": None if message.data is None else _json_text(message.data),
        "metadata": _json_text(message.metadata) if message.metadata else None,
        "receipts": [],
    }


def _receipt_shown(receipt: Message) -> dict[str, Any]:
    return {"m": receipt, **receipt_fields(receipt)}


def _sections(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The items grouped by conversation_id, each group where its first item is, in seq order
    within it."""
    sections: dict[str, dict[str, Any]] = {}
    for item in items:
        cid = item["m"].conversation_id
        sections.setdefault(cid, {"id": cid, "items": []})["items"].append(item)
    return list(sections.values())


def _shown(channel: Channel, messages: list[Message], bodies: Bodies) -> list[dict[str, Any]]:
    """A page's envelopes: each receipt on the message it answers when that is on the page
    (loaded with the page's receipts of later seqs, one query), else an item of its own."""
    receipts = direct_receipts_for(channel=channel, seqs=[m.seq for m in messages])
    on_page = {m.seq for m in messages}
    items: list[dict[str, Any]] = []
    for message in messages:
        if message.status == Delivery.Kind.RECEIPT and message.reply_to in on_page:
            continue  # shown on its message
        item = _envelope_shown(message, bodies)
        item["receipts"] = [_receipt_shown(r) for r in receipts.get(message.seq, [])]
        items.append(item)
    return items


def _form_values(source: Any) -> dict[str, str]:
    return {key: source.get(key, "") for key in FORM_FIELDS}


def _send(me: Agent, form: dict[str, str]) -> services.Sent:
    """Send the form's envelope as ``me``. Raises AppError (the service's, or INVALID_JSON,
    MISSING_FIELD for the form's own rules)."""
    data: Any = None
    if form["data"].strip():
        try:
            data = json.loads(form["data"])
        except (ValueError, RecursionError):
            raise AppError(
                "INVALID_JSON", "data must be JSON (or empty)", detail={"field": "data"}
            ) from None
    text = form["text"] or None
    if text is None and data is None:
        raise AppError("MISSING_FIELD", "write a text or some data", detail={"field": "text"})
    return services.envelope_send(
        sender=me,
        to=form["to"].strip(),
        conversation_id=form["conversation_id"].strip() or None,
        correlation_id=form["correlation_id"].strip() or None,
        text=text,
        data=data,
        content_type=form["content_type"].strip() or None,
    )


def _sent_redirect(sent: services.Sent, me: Agent) -> HttpResponse:
    peer = sent.delivery.recipient.name
    url = reverse("dashboard:direct-conversation", args=[peer])
    return redirect(f"{url}#m-{sent.message.seq}")


@login_required
@require_http_methods(["GET", "POST"])
@heavy_page
def direct_list(request: SignedInRequest) -> HttpResponse:
    """My conversations by peer, newest first, with their unread counts; a form to message any
    agent."""
    me = human_agent(request.user)
    error: AppError | None = None
    form = _form_values({})
    if request.method == "POST":
        form = _form_values(request.POST)
        try:
            return _sent_redirect(_send(me, form), me)
        except AppError as exc:
            error = exc
    conversations, more = direct_conversations(agent=me, limit=PAGE_CONVERSATIONS)
    return render(
        request,
        "dashboard/direct_list.html",
        {
            "agent": me,
            "conversations": conversations,
            "more": more,
            "error": error,
            "form": form,
        },
        status=400 if error is not None else 200,
    )


@login_required
@require_http_methods(["GET", "POST"])
@heavy_page
def direct_conversation(request: SignedInRequest, peer: str) -> HttpResponse:
    """My envelopes with ``peer`` (the latest 50, or those before ``?before=``; of one
    ``?conversation=`` when given), grouped by conversation_id, each with its receipts; a form
    that sends to ``peer``. Opening it marks nothing read."""
    me = human_agent(request.user)
    peer, channel = _peer_or_404(me, peer)
    error: AppError | None = None
    try:
        conversation = _conversation_param(request)
        before = int_parse(request.GET.get("before"), field="before", code="INVALID_SEQ", minimum=1)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": me, "error": exc}, status=400)
    form = _form_values({"conversation_id": conversation or ""})
    if request.method == "POST":
        form = {**_form_values(request.POST), "to": peer}
        try:
            return _sent_redirect(_send(me, form), me)
        except AppError as exc:
            error = exc
    form["to"] = peer
    items: list[dict[str, Any]] = []
    bodies = Bodies()
    highest = cursor = unread = 0
    messages: list[Message] = []
    if channel is not None:
        messages = direct_messages_before(
            channel=channel, before=before, limit=PAGE_ENVELOPES, conversation=conversation
        )
        items = _shown(channel, messages, bodies)
        highest = messages[-1].seq if messages else 0
        cursor = cursor_get(agent=me, channel=channel)
        unread = message_unread_count(channel=channel, agent=me, cursor=cursor)
    return render(
        request,
        "dashboard/direct.html",
        {
            "agent": me,
            "peer": peer,
            "channel": channel,
            "sections": _sections(items),
            "conversation": conversation,
            "highest": highest,
            "older": messages[0].seq if messages and messages[0].seq > 1 else None,
            "live": before is None and channel is not None,
            "unread": unread,
            "error": error,
            "form": form,
            "budget_used": bodies.used_up,
            "receipt_statuses": RECEIPT_STATUSES,
        },
        status=400 if error is not None else 200,
    )


@require_http_methods(["GET"])
@heavy_page
def direct_fragment(request: HttpRequest, peer: str) -> HttpResponse:
    """The envelopes after ``?after=`` as HTML for the live page (of ``?conversation=`` when
    given): conversation sections holding new messages, and the receipts of messages the page
    may show (``li.receipt`` with ``data-for``, which the page puts on that message). Headers:
    ``AgentChat-Last``, the highest seq looked at (where the page continues), and
    ``AgentChat-More: 1`` when more follow. 403 when not signed in."""
    if not request.user.is_authenticated:
        return HttpResponse("sign in first", status=403, content_type="text/plain")
    me = human_agent(cast(SignedInRequest, request).user)
    peer, channel = _peer_or_404(me, peer)
    if channel is None:
        raise Http404("no direct messages yet")
    try:
        after = int_parse(request.GET.get("after"), field="after", code="INVALID_SEQ", minimum=0)
        conversation = _conversation_param(request)
    except AppError as exc:
        return HttpResponse(exc.message, status=400, content_type="text/plain")
    messages, last, more = direct_messages_after(
        channel=channel, after=after or 0, limit=FRAGMENT_ENVELOPES, conversation=conversation
    )
    bodies = Bodies()
    items = []
    receipts = []
    for message in messages:
        if message.status == Delivery.Kind.RECEIPT and message.reply_to is not None:
            receipts.append(_receipt_shown(message))
            continue
        items.append(_envelope_shown(message, bodies))
    response = render(
        request,
        "dashboard/_direct_fragment.html",
        {
            "agent": me,
            "peer": peer,
            "sections": _sections(items),
            "receipts": receipts,
            "receipt_statuses": RECEIPT_STATUSES,
        },
    )
    response[FRAGMENT_LAST_HEADER] = str(last)
    response[FRAGMENT_MORE_HEADER] = "1" if more else "0"
    return response


@login_required
@require_http_methods(["POST"])
def direct_mark_read(request: SignedInRequest, peer: str) -> HttpResponse:
    """Mark the conversation read up to the highest seq the page showed (never backwards)."""
    me = human_agent(request.user)
    peer, channel = _peer_or_404(me, peer)
    try:
        seq = int_parse(request.POST.get("seq"), field="seq", code="INVALID_SEQ", minimum=0)
        if seq is None:
            raise AppError("INVALID_SEQ", "seq is required", detail={"field": "seq"})
        if channel is not None and seq > cursor_get(agent=me, channel=channel):
            services.cursor_ack(channel=channel, agent=me, seq=seq)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": me, "error": exc}, status=400)
    return redirect("dashboard:direct-conversation", peer)


@login_required
@require_http_methods(["POST"])
def direct_receipt(request: SignedInRequest, peer: str) -> HttpResponse:
    """Send a receipt (``status``, optional ``detail``) for the envelope ``message_id`` I
    received from ``peer``."""
    me = human_agent(request.user)
    peer, _ = _peer_or_404(me, peer)
    try:
        sent = services.receipt_send(
            sender=me,
            message_id=request.POST.get("message_id", ""),
            status=request.POST.get("status", ""),
            to=peer,
            detail=request.POST.get("detail") or None,
        )
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": me, "error": exc}, status=400)
    url = reverse("dashboard:direct-conversation", args=[peer])
    return redirect(f"{url}#m-{sent.message.reply_to}")


@login_required
@require_http_methods(["GET"])
@heavy_page
def monitor(request: SignedInRequest) -> HttpResponse:
    """Staff only (404 for anyone else): every inbox fanned in, ``MONITOR_PAGE`` deliveries a
    page from ``?cursor=`` (the monitor's opaque cursor; from the start without one), in the
    monitor's presentation order; read-only."""
    if not request.user.is_staff:
        raise Http404("no such page")
    me = human_agent(request.user)
    raw = request.GET.get("cursor") or None
    try:
        cursor = monitor_cursor_decode(raw) if raw is not None else None
        page = monitor_page(cursor=cursor, limit=MONITOR_PAGE)
    except AppError as exc:
        return render(request, "dashboard/error.html", {"agent": me, "error": exc}, status=400)
    deliveries = []
    for item in page.items:
        record = json.loads(item.json)
        envelope = record["envelope"]
        text = envelope["message"]["text"]
        shown, cut = excerpt(text, SHOWN_JSON_CHARACTERS) if text is not None else (None, False)
        data = envelope["message"]["data"]
        deliveries.append(
            {
                **record,
                "text": shown,
                "cut": cut,
                "data": None if data is None else _json_text(data),
            }
        )
    return render(
        request,
        "dashboard/monitor.html",
        {
            "agent": me,
            "deliveries": deliveries,
            "next_cursor": page.next_cursor,
            "more": _more(page),
            "tails": list(page.tails.items())[:TAILS_SHOWN],
            "tails_count": len(page.tails),
            "cursor": raw,
        },
    )


def _more(page: MonitorPage) -> bool:
    """Whether deliveries are numbered beyond the page's ``next_cursor``."""
    return page.more
