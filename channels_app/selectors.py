"""Every read of channels_app, shared by the API, the live endpoints and (later) the dashboard."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, cast

from django.conf import settings
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce, Lower

from agentchat.core.db.rows import RowSelect
from agentchat.core.http.pages import LIST_LIMIT_MAX, ListPage, PageWindow, list_page, size_of
from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import CHANNEL_NAME_MAX, is_record_id, record_id_check
from channels_app import events
from channels_app.approval_rule import APPROVAL_REQUEST
from channels_app.models import Channel, Cursor, LoopGuard, MarkerClaim, Message, Presence
from channels_app.records import channel_to_dict, message_json

PEEK_DEFAULT = 100
PEEK_MAX = 1000
READ_LIMIT_MAX = 1000  # messages per read or wait (also the default)
# Rows fetched by the first query of a paged read: the usual handful of new messages in one
# query, and a bounded amount of memory even when they are big (a request is at most 768 KiB).
# Further rows are fetched as many as the page can still take, planned from their stored sizes.
PAGE_BATCH = 16
# Messages a read or a wait examines per request, relevant or not (a range of seqs: a channel's
# seqs are unique, so the range holds at most this many rows): a read for an agent to whom
# nothing of a long run of messages is addressed answers after this many rows, not the run.
READ_SCAN_ROWS = 1000
PAGE_PLAN = 256  # rows whose sizes one planning query looks at
# A channel's planned size in a list: what can be big (the topic, the roster).
CHANNEL_SIZE = size_of("name", "topic", "members", "created_by")


# Every channel endpoint starts with this lookup; RowSelect spares it the queryset compiler.
_CHANNEL_BY_NAME = RowSelect((Channel, "c"), from_="{Channel} c", where="c.name = %s")


def channel_not_found(name: str) -> AppError:
    """The one answer for a channel that does not exist and for one the viewer may not see:
    the same code, message and detail, so a non-member cannot tell them apart."""
    return AppError("CHANNEL_NOT_FOUND", f"channel {name!r} not found", detail={"name": name})


def channel_visible(channel: Channel, viewer: str) -> bool:
    """The access rule (DESIGN §5 "Visibility"): an open channel is visible to everyone with a
    token; a members-only one only to the names on its roster. Anything else is closed.

    ``viewer`` is the acting principal's name: an agent's name, or ``user:<name>`` for a staff
    browser session without a linked agent (agentchat.core.http.scope), which is never on a roster
    (members are agent names, which cannot contain ':')."""
    return _visible(channel.visibility, channel.members, viewer)


def channels_refusing_owner(owner: str, channels: Iterable[Channel]) -> str | None:
    """Why ``owner`` may not be given a lease or lock in these channels (the admin's
    recoveries name any owner): a members-only channel whose roster lacks them, to whom it
    does not exist. None when every channel is visible to them."""
    hidden = sorted({channel.name for channel in channels if not channel_visible(channel, owner)})
    if not hidden:
        return None
    return f"{owner} is not a member of the members-only channel(s) {', '.join(hidden)}"


def _visible(visibility: str, members: Any, viewer: str) -> bool:
    if visibility == Channel.Visibility.OPEN:
        return True
    # A list of names, compared exactly (a string roster would match substrings).
    return (
        visibility == Channel.Visibility.MEMBERS and isinstance(members, list) and viewer in members
    )


def channel_get(name: str, *, viewer: str) -> Channel:
    """The channel ``name`` as ``viewer`` may see it. Raises CHANNEL_NOT_FOUND when it does not
    exist *or* is members-only and ``viewer`` is not a member (the same error body).

    This is the one place that decides who sees a channel: every surface that names a channel
    looks it up here with the acting principal as ``viewer`` — the REST views of channels,
    tasks and locks, marker claims, the wait and the websocket stream, and the surfaces still to
    come (search, sync exports of a user, the dashboard, MCP). Lists use
    ``channels_visible_to``; reads that may run after a visibility change re-check with
    ``channel_last_seq_visible`` or ``messages_after_visible``."""
    if not is_record_id(name, max_length=CHANNEL_NAME_MAX):
        raise channel_not_found(name)  # no such channel can exist (and a NUL fails PostgreSQL)
    row = _CHANNEL_BY_NAME.first([name])
    channel = None if row is None else cast(Channel, row[0])
    if channel is None or not channel_visible(channel, viewer):
        raise channel_not_found(name)
    return channel


def channels_visible(viewer: str) -> Q:
    """``channel_visible`` as a filter on Channel rows."""
    return Q(visibility=Channel.Visibility.OPEN) | Q(
        visibility=Channel.Visibility.MEMBERS, members__has_name=viewer
    )


def channels_visible_to(viewer: str) -> QuerySet[Channel]:
    """Every channel ``viewer`` may see (lists, unread counts), by name."""
    return Channel.objects.filter(channels_visible(viewer)).order_by("name")


def channel_last_seq_visible(channel: Channel, *, viewer: str) -> int:
    """The channel's last seq, re-reading its access in the same row read: raises
    CHANNEL_NOT_FOUND when ``viewer`` may no longer see it (a change of members or visibility
    since ``channel_get``). Reads and waits call it inside their transaction, so a read that
    commits after a change obeys the change."""
    row = (
        Channel.objects.filter(pk=channel.pk)
        .values_list("last_seq", "visibility", "members")
        .first()
    )
    if row is None:
        raise channel_not_found(channel.name)
    last_seq, visibility, members = row
    if not _visible(visibility, members, viewer):
        raise channel_not_found(channel.name)
    return last_seq


def message_relevant_filter(name: str) -> Q:
    """SPEC §5 relevance with namespaces in SQL (``agentchat.relevance``): a
    broadcast, or a recipient that is ``name`` (``,name,``) or one of its sub-agents
    (``,name.``), and not ``name``'s own. Exact, as the recipients column holds validated
    names between commas; ``Message.is_relevant_to`` is the same rule on a row."""
    addressed = Q(recipients__contains=f",{name},") | Q(recipients__contains=f",{name}.")
    return (Q(recipients="") | addressed) & ~Q(sender=name)


def _attach(rows: QuerySet[Message] | list[Message], channel: Channel) -> list[Message]:
    result = list(rows)
    for message in result:
        message.channel = channel  # spares a query per message when serializing
    return result


def messages_relevant_exist(*, channel: Channel, name: str, after: int, upto: int) -> bool:
    # Exact in SQL (see message_unread_count).
    return (
        Message.objects.filter(channel=channel, seq__gt=after, seq__lte=upto)
        .filter(message_relevant_filter(name))
        .exists()
    )


class MessagePage(NamedTuple):
    parts: list[bytes]  # each delivered message as JSON (message_json), in seq order
    last: int  # the seq of the last one delivered (``after`` when none)
    more: bool  # relevant messages up to ``upto`` remain after ``last``


def _rows_within(rows: QuerySet[Message], *, count: int, max_bytes: int) -> QuerySet[Message]:
    """The first rows of ``rows`` (ordered by seq) within ``count`` and about ``max_bytes``, at
    least one: planned from the sizes stored with the rows (``Message.json_size``), so that no
    more rows are loaded than can be sent."""
    sizes = list(rows.values_list("seq", "json_size")[:PAGE_PLAN])
    if not sizes:
        return rows.none()
    total, last = 0, sizes[0][0]
    for taken, (seq, size) in enumerate(sizes, start=1):
        total += size + 1
        if taken > 1 and (taken > count or total > max_bytes):
            break
        last = seq
    return rows.filter(seq__lte=last)


def message_page(
    *, channel: Channel, name: str, after: int, upto: int, limit: int, max_bytes: int
) -> MessagePage:
    """The relevant messages after ``after`` up to ``upto``, rendered: at most ``limit`` of them
    and at most ``max_bytes`` of JSON, but always the first one. The first query fetches a few
    rows; later ones as many as the page can still take, so a backlog costs one page of memory,
    not the backlog. Rendering raises on a row JSON cannot carry; callers render inside the
    transaction that moves the cursor, so a page that cannot be sent moves nothing."""
    parts: list[bytes] = []
    size = 0
    last = position = after
    relevant = (
        Message.objects.filter(channel=channel, seq__lte=upto)
        .filter(message_relevant_filter(name))
        .order_by("seq")
    )
    while True:
        following = relevant.filter(seq__gt=position)
        if not parts:
            fetched = list(following[:PAGE_BATCH])
            complete = len(fetched) < PAGE_BATCH  # nothing relevant after these
        else:
            planned = _rows_within(following, count=limit - len(parts), max_bytes=max_bytes - size)
            fetched = list(planned)
            complete = not fetched
        for message in _attach(fetched, channel):
            position = message.seq
            if not message.is_relevant_to(name):
                continue
            if len(parts) >= limit:
                return MessagePage(parts, last, True)
            part = message_json(message)
            if parts and size + len(part) > max_bytes:
                return MessagePage(parts, last, True)
            parts.append(part)
            size += len(part) + 1
            last = message.seq
        if complete:
            return MessagePage(parts, last, False)


def messages_after_within(
    *, channel: Channel, after: int, limit: int, max_bytes: int
) -> list[Message]:
    """Up to ``limit`` messages after ``after`` and about ``max_bytes`` of them (at least one):
    a stream's replay batch, which it holds while its client reads."""
    rows = Message.objects.filter(channel=channel, seq__gt=after).order_by("seq")
    return _attach(_rows_within(rows, count=limit, max_bytes=max_bytes), channel)


def messages_after_visible(
    *, channel: Channel, viewer: str, after: int, limit: int, max_bytes: int
) -> list[Message]:
    """``messages_after_within`` for a live subscriber: raises CHANNEL_NOT_FOUND when
    ``viewer`` may no longer see the channel. Access is checked *after* the messages are read,
    so a batch that holds a change of members or visibility is judged by that change (or a
    later one)."""
    messages = messages_after_within(channel=channel, after=after, limit=limit, max_bytes=max_bytes)
    channel_last_seq_visible(channel, viewer=viewer)
    return messages


class PeekPage(NamedTuple):
    messages: list[Message]  # ascending by seq
    more: bool  # messages were left out: later ones (with ``after``), else earlier ones


def sizes_within(sizes: list[tuple[int, int]], max_bytes: int) -> int:
    """How many of the planned rows (``(seq, json_size)``, in the order sent) fit in about
    ``max_bytes`` of a JSON list: always at least one (``sizes`` is not empty)."""
    total, taken = 0, 0
    for _seq, size in sizes:
        total += size + 1
        if taken and total > max_bytes:
            break
        taken += 1
    return taken


def message_peek(
    *,
    channel: Channel,
    after: int | None = None,
    limit: int = PEEK_DEFAULT,
    max_bytes: int = 1024 * 1024,
) -> PeekPage:
    """The last ``limit`` messages, or the first ``limit`` after ``after``; ascending by seq;
    at most about ``max_bytes`` of JSON (the read's budget, always at least one message),
    planned from the sizes stored with the rows, so that no more rows are loaded than sent.
    The budget keeps the messages next to ``after``, or the latest ones without it."""
    ordered = Message.objects.filter(channel=channel)
    if after is not None:
        ordered = ordered.filter(seq__gt=after).order_by("seq")
    else:
        ordered = ordered.order_by("-seq")
    sizes = list(ordered.values_list("seq", "json_size")[: limit + 1])
    if not sizes:
        return PeekPage([], False)
    taken = sizes_within(sizes[:limit], max_bytes)
    first, last = sorted((sizes[0][0], sizes[taken - 1][0]))
    rows = Message.objects.filter(channel=channel, seq__gte=first, seq__lte=last).order_by("seq")
    return PeekPage(_attach(rows, channel), taken < len(sizes))


def message_unread_count(*, channel: Channel, agent: Agent, cursor: int) -> int:
    # Exact in SQL: recipient lists hold validated lowercase names, so LIKE's ASCII case
    # folding on SQLite cannot match a different name (and Django escapes % and _).
    return (
        Message.objects.filter(channel=channel, seq__gt=cursor)
        .filter(message_relevant_filter(agent.name))
        .count()
    )


def cursor_and_unread(agent: Agent, *, conversation: bool = False) -> tuple[Coalesce, Subquery]:
    """Per channel row: ``agent``'s cursor (0 when none) and the count of messages for it after
    that cursor (to annotate as ``cursor``, then ``unread``: the count reads ``cursor``), over
    the (channel, seq) index range after the cursor; with ``conversation``, messages only (no
    audit, no event: the dashboard's badges)."""
    cursor = Coalesce(
        Subquery(Cursor.objects.filter(agent=agent, channel=OuterRef("pk")).values("seq")[:1]),
        0,
    )
    rows = Message.objects.filter(channel=OuterRef("pk"), seq__gt=OuterRef("cursor")).filter(
        message_relevant_filter(agent.name)
    )
    if conversation:
        rows = rows.filter(kind=Message.Kind.MESSAGE)
    unread = rows.order_by().values("channel").annotate(n=Count("pk")).values("n")
    return cursor, Subquery(unread)


def channel_list(
    *,
    agent: Agent,
    after: str | None = None,
    limit: int = LIST_LIMIT_MAX,
    conversation: bool = False,
) -> ListPage:
    """A page of the channels the agent may see (after the name ``after``, by name), each with
    its cursor and unread count (``agentchat.core.http.pages``). The page is planned from the
    channels' sizes (the topic and the roster can be big), then loaded in one query: per
    channel, a count over the (channel, seq) index range after the cursor, so it costs the
    unread rows, not the channel's size. ``conversation``: ``cursor_and_unread``'s."""
    cursor, unread = cursor_and_unread(agent, conversation=conversation)

    def load(rows: QuerySet[Channel]) -> QuerySet[Channel]:
        return rows.annotate(cursor=cursor).annotate(unread=Coalesce(unread, 0))

    def render(channel: Channel) -> dict[str, Any]:
        data = channel_to_dict(channel)
        # Annotated by load().
        data["cursor"] = channel.cursor  # type: ignore[attr-defined]
        data["unread"] = channel.unread  # type: ignore[attr-defined]
        return data

    return list_page(
        channels_visible_to(agent.name),
        key="name",
        size=CHANNEL_SIZE,
        window=PageWindow(after, limit),
        load=load,
        render=render,
    )


def channel_after_check(value: str) -> None:
    """``?after=`` of the channel list: a name as names are looked up (``channel_get``).
    Raises INVALID_NAME."""
    record_id_check(
        value, what="after", code="INVALID_NAME", max_length=CHANNEL_NAME_MAX, field="after"
    )


# --- events and presence ----------------------------------------------------------------------

EVENTS_DEFAULT = PEEK_DEFAULT  # events are read like peek
EVENTS_MAX = PEEK_MAX


class EventItem(NamedTuple):
    seq: int
    id: str
    event: dict[str, Any]


def _events_of_type(
    channel: Channel, kind: str, *, after: int | None, limit: int
) -> list[tuple[int, str, str]]:
    # One seek in the partial index of event messages (Message.Meta.indexes; SQLite's plan
    # was checked: SEARCH … USING INDEX message_event_status_seq).
    rows = Message.objects.filter(
        channel=channel, kind=Message.Kind.EVENT, status=events.STATUS_PREFIX + kind
    )
    if after is not None:
        rows = rows.filter(seq__gt=after).order_by("seq")
    else:
        rows = rows.order_by("-seq")
    return list(rows.values_list("seq", "id", "body")[:limit])


def events_read(
    *,
    channel: Channel,
    viewer: str,
    type: str | None = None,
    after: int | None = None,
    limit: int = EVENTS_DEFAULT,
) -> tuple[list[EventItem], bool]:
    """The channel's events, ascending by seq: the first ``limit`` after ``after``, or the last
    ``limit`` without it (as peek); only ``type`` when given. Returns (events, more), ``more``
    saying that events after these exist (with ``after``) or before them (without).

    Only event messages count (kind ``event``, made by ``services.event_post`` or, later, an
    import that validated them): ordinary messages never do, whatever their status. Each type
    is one seek in the index of event messages, so the cost is the page's, not the channel's.
    Raises CHANNEL_NOT_FOUND (``viewer`` may no longer see the channel), EVENT_INVALID_TYPE,
    EVENT_MALFORMED_BODY (a stored event that does not parse: named by its seq)."""
    if type is not None and type not in events.TYPES:
        raise AppError(
            "EVENT_INVALID_TYPE",
            "type must be capability or status",
            detail={"field": "type", "value": str(type)[:100], "choices": list(events.TYPES)},
        )
    channel_last_seq_visible(channel, viewer=viewer)
    rows = [
        row
        for kind in ([type] if type else events.TYPES)
        for row in _events_of_type(channel, kind, after=after, limit=limit + 1)
    ]
    rows.sort(key=lambda row: row[0], reverse=after is None)
    more = len(rows) > limit
    rows = rows[:limit]
    if after is None:
        rows.reverse()
    items = [
        EventItem(seq, message_id, events.event_parse(body, where=f"#{seq}"))
        for seq, message_id, body in rows
    ]
    return items, more


class PresenceItem(NamedTuple):
    agent: str
    presence: Presence | None  # None: the agent has read the channel but sent nothing
    cursor: int | None
    read_at: Any  # the cursor's last move (a datetime), or None


def presence_list(*, channel: Channel, viewer: str) -> list[PresenceItem]:
    """Who is around in a channel, by name: every sender (its last activity and its latest
    status and capability events) and every agent with a cursor there (its last read or ack).
    Two queries over rows per agent (``Presence``, ``Cursor``), none over the messages.
    Raises CHANNEL_NOT_FOUND (``viewer`` may no longer see the channel)."""
    channel_last_seq_visible(channel, viewer=viewer)
    rows = {row.agent: row for row in Presence.objects.filter(channel=channel)}
    cursors = {
        name: (seq, updated_at)
        for name, seq, updated_at in Cursor.objects.filter(channel=channel).values_list(
            "agent__name", "seq", "updated_at"
        )
    }
    return [
        PresenceItem(name, rows.get(name), *cursors.get(name, (None, None)))
        for name in sorted({*rows, *cursors})
    ]


def loop_flags(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """The loop guard's standing flags of the channels named (``services.loopguard``), by
    name: ``flagged_at`` (a datetime), ``flagged_seq`` (the ``loop.suspected`` message; None in a
    direct channel), ``run`` (the run's length so far). A flag past its cool-down is none."""
    since = clock.now().timestamp() - float(settings.AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS)
    rows = LoopGuard.objects.filter(
        channel__name__in=list(names), flagged_at__isnull=False, flagged_at__gt=since
    ).values_list("channel__name", "flagged_at", "flagged_seq", "run")
    return {
        name: {
            "flagged_at": datetime.fromtimestamp(flagged_at, tz=UTC),
            "flagged_seq": flagged_seq,
            "run": run,
        }
        for name, flagged_at, flagged_seq, run in rows
        if flagged_at is not None
    }


def approval_request_find(*, channel: Channel, seq: int) -> Message | None:
    """Message #seq of ``channel`` (looked up by its viewer) if it is a request for approval,
    answered or not; None otherwise."""
    return Message.objects.filter(channel=channel, seq=seq, status=APPROVAL_REQUEST).first()


# --- whole-channel reads for the operator's tools and the dashboard ---------------------------
# The folder sync and the import run as the server's operator, who sees every channel: these
# look up by name without a viewer. Surfaces acting for a principal use ``channel_get``.


def channel_find(name: str) -> Channel | None:
    """The channel named exactly ``name``, whoever may see it, or None."""
    return Channel.objects.filter(name=name).first()


def channel_list_all() -> list[Channel]:
    """Every channel, by name, whoever may see it."""
    return list(Channel.objects.order_by("name"))


def channel_pk_list() -> list[int]:
    """The primary keys of every channel (what a follower subscribes to)."""
    return list(Channel.objects.values_list("pk", flat=True))


def channel_name_taken(names: Iterable[str]) -> str | None:
    """One of ``names`` (lowercase) that an existing channel has, compared without case, or
    None."""
    return (
        Channel.objects.annotate(lname=Lower("name"))
        .filter(lname__in=list(names))
        .values_list("lname", flat=True)
        .first()
    )


def message_list_among(
    *,
    channel: Channel,
    seqs: Iterable[int],
    fields: Sequence[str] = (),
    envelopes: bool = False,
) -> list[Message]:
    """The messages of ``channel`` with these seqs (in no order), only ``fields`` loaded when
    given; each with its HTTP v1 ``Delivery`` (in the same query) when ``envelopes``."""
    rows = Message.objects.filter(channel=channel, seq__in=set(seqs))
    if fields:
        rows = rows.only(*fields)
    if envelopes:
        rows = rows.select_related("delivery")
    return _attach(rows, channel)


def message_list_before(*, channel: Channel, before: int | None, limit: int) -> list[Message]:
    """The last ``limit`` messages of ``channel`` before seq ``before`` (or its last ones),
    ascending by seq."""
    rows = Message.objects.filter(channel=channel)
    if before is not None:
        rows = rows.filter(seq__lt=before)
    found = _attach(rows.order_by("-seq")[:limit], channel)
    found.reverse()
    return found


def message_count_upto(*, channel: Channel, upto: int) -> int:
    """How many messages of ``channel`` have a seq of at most ``upto``."""
    return Message.objects.filter(channel=channel, seq__lte=upto).count()


def message_iter_after(
    *,
    channel: Channel,
    after: int,
    upto: int | None = None,
    fields: Sequence[str] = (),
    chunk_size: int,
    limit: int | None = None,
    envelopes: bool = False,
) -> Iterator[Message]:
    """The messages of ``channel`` after seq ``after`` (up to ``upto`` when given, the first
    ``limit`` when given), ascending, streamed ``chunk_size`` rows at a time (only ``fields``
    loaded when given): memory for one chunk, not the channel. Each with its HTTP v1
    ``Delivery`` (in the same query) when ``envelopes``."""
    rows = Message.objects.filter(channel=channel, seq__gt=after)
    if upto is not None:
        rows = rows.filter(seq__lte=upto)
    if fields:
        rows = rows.only(*fields)
    if envelopes:
        rows = rows.select_related("delivery")
    rows = rows.order_by("seq")
    if limit is not None:
        rows = rows[:limit]
    return rows.iterator(chunk_size=chunk_size)


def message_last_by_channel(names: Iterable[str]) -> dict[str, dict[str, Any]]:
    """Per channel name of ``names``: its last message's ``seq``, ``sender``, ``title`` and
    ``ts`` (channels without messages are left out)."""
    rows = Message.objects.filter(channel__name__in=list(names), seq=F("channel__last_seq")).values(
        "channel__name", "seq", "sender", "title", "ts"
    )
    return {row["channel__name"]: dict(row) for row in rows}


def message_heads_at(places: Iterable[tuple[str, int]]) -> dict[tuple[str, int], dict[str, Any]]:
    """The messages at ``places`` (channel name, seq), each as its ``kind``, ``title``,
    ``status`` and ``ts``, by place: one query (the overview's "latest message" of each agent;
    the caller bounds ``places``)."""
    wanted = Q()
    for name, seq in places:
        wanted |= Q(channel__name=name, seq=seq)
    if not wanted:
        return {}
    rows = Message.objects.filter(wanted).values(
        "channel__name", "seq", "kind", "title", "status", "ts"
    )
    return {(row["channel__name"], row["seq"]): dict(row) for row in rows}


def cursor_iter_for_channel(*, channel: Channel, chunk_size: int) -> Iterator[tuple[str, int]]:
    """Every cursor of ``channel`` as (agent name, seq), streamed."""
    rows = Cursor.objects.filter(channel=channel).values_list("agent__name", "seq")
    return rows.iterator(chunk_size=chunk_size)


def marker_claim_iter_for_channel(*, channel: Channel, chunk_size: int) -> Iterator[MarkerClaim]:
    """Every claimed marker of ``channel``, by marker, streamed."""
    rows = MarkerClaim.objects.filter(channel=channel).order_by("marker")
    return rows.iterator(chunk_size=chunk_size)


def cursor_get(*, agent: Agent, channel: Channel) -> int:
    return (
        Cursor.objects.filter(agent=agent, channel=channel).values_list("seq", flat=True).first()
        or 0
    )


def message_replies_among(*, channel: Channel, parents: Iterable[int], limit: int) -> list[Message]:
    """The first ``limit`` messages of ``channel`` that reply to one of ``parents``, by seq
    (a thread's next level; the dashboard's thread view)."""
    rows = Message.objects.filter(channel=channel, reply_to__in=set(parents)).order_by("seq")
    return _attach(rows[:limit], channel)


def message_first_unread(*, channel: Channel, agent: Agent, cursor: int) -> int | None:
    """The seq of the first message after ``cursor`` relevant to ``agent`` (None: none)."""
    return (
        Message.objects.filter(channel=channel, seq__gt=cursor)
        .filter(message_relevant_filter(agent.name))
        .order_by("seq")
        .values_list("seq", flat=True)
        .first()
    )


def message_unread_counts(*, channel: Channel, agent: Agent, cursor: int) -> dict[str, int]:
    """``agent``'s unread messages after ``cursor`` (``message_unread_count``) up to the
    channel's last seq as read first (``upto``): how many in all (``unread``) and how many are
    conversation, messages rather than audits or events (``conversation``); one count query."""
    upto = Channel.objects.filter(pk=channel.pk).values_list("last_seq", flat=True).first() or 0
    counts = (
        Message.objects.filter(channel=channel, seq__gt=cursor, seq__lte=upto)
        .filter(message_relevant_filter(agent.name))
        .aggregate(
            unread=Count("pk"), conversation=Count("pk", filter=Q(kind=Message.Kind.MESSAGE))
        )
    )
    return {"unread": counts["unread"], "conversation": counts["conversation"], "upto": upto}
