"""The channel page as a chat (issue 21): a title derived from the body's first line when the
composer leaves it empty, answers for the page's own script (JSON instead of a redirect), the
cursor moved back by "mark unread from here", and a message's thread (its ancestors and its
replies)."""

from __future__ import annotations

import re
from typing import Any

from django.http import HttpRequest, JsonResponse

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import INVISIBLE
from channels_app.models import Channel, Message
from channels_app.selectors import (
    cursor_get,
    message_list_among,
    message_replies_among,
    message_unread_counts,
)

# A derived title is the body's first line of text, at most this many characters.
TITLE_DERIVED_CHARS = 80
# A line's markdown markers a title leaves out: headings, quotes, list bullets and numbers.
_MARKERS = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|[-*+]\s+|\d{1,9}[.)]\s+)*")
_FENCE = re.compile(r"^\s*(```|~~~)")
# Only the start of a body is looked at (a body may be megabytes).
_LOOKED_AT = 4096


def title_from_body(body: str) -> str:
    """The title a dashboard post gets when its title is left empty: the first line of the
    body with text (code fences skipped), its markdown markers, invisible characters and
    repeated spaces dropped, cut to TITLE_DERIVED_CHARS at a word end with "…"; "" for a
    body with no text."""
    for line in body[:_LOOKED_AT].splitlines():
        if _FENCE.match(line):
            continue
        text = " ".join(INVISIBLE.sub("", _MARKERS.sub("", line)).split())
        if not text:
            continue
        if len(text) <= TITLE_DERIVED_CHARS:
            return text
        cut = text[: TITLE_DERIVED_CHARS - 1]
        space = cut.rfind(" ")
        return (cut[:space] if space >= TITLE_DERIVED_CHARS // 2 else cut).rstrip() + "…"
    return ""


def title_is_derived(message: Message) -> bool:
    """Whether a message's title says no more than its body's first line (the page then shows
    the body alone)."""
    return message.kind == Message.Kind.MESSAGE and message.title == title_from_body(message.body)


def wants_json(request: HttpRequest) -> bool:
    """The page's own script asks for JSON (``Accept: application/json``); a plain form post
    gets a redirect."""
    return request.headers.get("Accept", "").startswith("application/json")


def error_json(exc: AppError) -> JsonResponse:
    return JsonResponse(
        {"error": {"code": exc.code, "message": exc.message, "detail": exc.detail or {}}},
        status=400,
    )


def read_state(agent: Any, channel: Channel) -> dict[str, int]:
    """What the page's read bar shows: the cursor, the unread count, how many of them are
    conversation, and the channel's last seq those counts include (``upto``)."""
    cursor = cursor_get(agent=agent, channel=channel)
    return {"cursor": cursor, **message_unread_counts(channel=channel, agent=agent, cursor=cursor)}


THREAD_ANCESTORS = 20  # how far up a reply chain the thread view goes
THREAD_REPLIES = 100  # how many replies (at every depth) it shows
THREAD_DEPTH = 6  # how many levels of replies down


def thread_of(channel: Channel, message: Message) -> tuple[list[Message], list[Message], bool]:
    """A message's thread: its ancestors (the message it replies to, that one's parent…, at
    most THREAD_ANCESTORS, the oldest first) and the replies to it and to them (at most
    THREAD_REPLIES, THREAD_DEPTH levels, by seq); and whether the replies were cut. A query
    per level, never per message."""
    ancestors: list[Message] = []
    parent = message.reply_to
    while parent is not None and len(ancestors) < THREAD_ANCESTORS:
        found = message_list_among(channel=channel, seqs=[parent])
        if not found:
            break
        ancestors.append(found[0])
        parent = found[0].reply_to
    ancestors.reverse()
    replies: list[Message] = []
    level = [message.seq]
    cut = False
    for _ in range(THREAD_DEPTH):
        room = THREAD_REPLIES - len(replies)
        found = message_replies_among(channel=channel, parents=level, limit=room + 1)
        if len(found) > room:
            found, cut = found[:room], True
        replies += found
        level = [m.seq for m in found]
        if not level or cut:
            break
    replies.sort(key=lambda m: m.seq)
    return ancestors, replies, cut
