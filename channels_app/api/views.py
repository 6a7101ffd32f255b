"""Thin views: parse → service/selector → serialize. Errors are raised
(agentchat.core.http.rest)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http import pages
from agentchat.core.http import schema as openapi
from agentchat.core.http.lane import request_abandoned
from agentchat.core.http.query import query_parameters
from agentchat.core.http.schema import raises
from agentchat.core.identity.auth import AgentRequest, sender_check
from agentchat.core.models import Agent
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import CHANNEL_NAME_MAX
from agentchat.core.rules.validation import int_parse
from channels_app import approvals, events, records, search, selectors, services, words
from channels_app.api import serializers as s


def after_seq_param(request: AgentRequest) -> int | None:
    """``?after=``: a seq in ASCII digits, None when absent. Raises INVALID_SEQ."""
    return int_parse(request.query_params.get("after"), field="after", code="INVALID_SEQ")


def limit_param(request: AgentRequest, *, maximum: int, default: int) -> int:
    """``?limit=``: 1 to ``maximum``, ``default`` when absent. Raises INVALID_VALUE."""
    return pages.limit_parse(request.query_params.get("limit"), maximum=maximum, default=default)


def posted_as(request: AgentRequest, name: str, data: dict[str, Any]) -> dict[str, Any]:
    """A post's where and who, as the service's ``channel``, ``sender`` and ``sender_kind``:
    the body's ``from`` (taken out of ``data``) must be the token's agent (SENDER_MISMATCH)
    and the channel one it sees (CHANNEL_NOT_FOUND)."""
    sender_check(request, data.pop("from", None))
    channel = selectors.channel_get(name, viewer=request.user.name)
    return {"channel": channel, "sender": request.user.name, "sender_kind": request.user.kind}


def created_json(body: bytes, created: bool) -> HttpResponse:
    """A JSON body, 201 for what the request made, 200 for what it found made (a retry)."""
    return HttpResponse(
        body,
        status=http.HTTP_201_CREATED if created else http.HTTP_200_OK,
        content_type="application/json",
    )


def peek_window(request: AgentRequest) -> tuple[int | None, int]:
    """``?after=&limit=`` of a list read like peek (messages, events): the first ``limit``
    after ``after``, or the last ``limit`` without it. Raises INVALID_SEQ, INVALID_VALUE."""
    return after_seq_param(request), limit_param(
        request, maximum=selectors.PEEK_MAX, default=selectors.PEEK_DEFAULT
    )


class ChannelListCreateApi(APIView):
    heavy_methods = ("GET",)  # agentchat.core.db.heavy

    @extend_schema(
        operation_id="channels_list",
        responses=s.ChannelListOutput,
        extensions=raises("INVALID_VALUE", "INVALID_NAME"),
        summary="List channels with the caller's unread counts, a page at a time (by name)",
    )
    @query_parameters(
        *openapi.page_parameters(
            openapi.record_id(CHANNEL_NAME_MAX), "the channel name of the previous page's `next`"
        )
    )
    def get(self, request: AgentRequest) -> HttpResponse:
        after, limit = pages.window_parse(request.query_params, selectors.channel_after_check)
        page = selectors.channel_list(agent=request.user, after=after, limit=limit)
        return pages.page_response("channels", page)

    @extend_schema(
        operation_id="channels_create",
        extensions=raises(
            *s.INPUT_CODES,
            "INVALID_NAME",
            "CHANNEL_EXISTS",
            "CHANNEL_MEMBERS_REQUIRED",
            "RATE_LIMITED",
        ),
        request=s.ChannelCreateInput,
        responses={201: s.ChannelOutput},
        summary="Create a channel",
        description=(
            "visibility `members`: only the agents on `members` see the channel (the creator "
            "is added when missing); to anyone else it does not exist."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest) -> Response:
        data = s.ChannelCreateInput.validate_input(request.data)
        channel = services.channel_create(
            created_by=request.user.name,
            budgeted=request.user.kind == Agent.Kind.AGENT,
            **data,
        )
        return Response(records.channel_to_dict(channel), status=http.HTTP_201_CREATED)


class ChannelDetailApi(APIView):
    @extend_schema(
        operation_id="channels_show", responses=s.ChannelOutput, summary="Show a channel"
    )
    @query_parameters()
    def get(self, request: AgentRequest, name: str) -> Response:
        channel = selectors.channel_get(name, viewer=request.user.name)
        cursor = selectors.cursor_get(agent=request.user, channel=channel)
        data = records.channel_to_dict(channel)
        data["cursor"] = cursor
        data["unread"] = selectors.message_unread_count(
            channel=channel, agent=request.user, cursor=cursor
        )
        return Response(data)

    @extend_schema(
        operation_id="channels_update",
        extensions=raises(
            *s.INPUT_CODES, "INVALID_NAME", "CHANNEL_MEMBERS_REQUIRED", "CHANNEL_NOT_MAINTAINER"
        ),
        request=s.ChannelUpdateInput,
        responses=s.ChannelOutput,
        summary="Update topic, members or visibility (posts channel.updated when something "
        "changed)",
        description=(
            "Only for those who see the channel (else 404 CHANNEL_NOT_FOUND, as for a channel "
            "that does not exist). Whoever makes a channel members-only joins its roster; a "
            "member may remove itself; a members-only channel keeps a member that is an agent "
            "(400 CHANNEL_MEMBERS_REQUIRED). A channel that names a maintainer is changed by the "
            "maintainer only (403 CHANNEL_NOT_MAINTAINER). Posts one channel.updated audit "
            "message with the "
            "actor and the before and after of each changed field; a PATCH that changes "
            "nothing posts nothing."
        ),
    )
    @query_parameters()
    def patch(self, request: AgentRequest, name: str) -> Response:
        data = s.ChannelUpdateInput.validate_input(request.data)
        channel = services.channel_update(
            channel=selectors.channel_get(name, viewer=request.user.name),
            actor=request.user.name,
            **data,
        )
        return Response(records.channel_to_dict(channel))


class MessageListPostApi(APIView):
    # A peek renders up to AGENTCHAT_READ_MAX_BYTES of messages: on the short requests' one
    # thread, one agent looping it made every other agent's post wait (p50 216 ms). Bounded by
    # its limit and that budget (a megabyte: 25 ms here), it may use the heavy thread kept
    # from the long requests.
    heavy_methods = ("GET",)
    heavy_bounded = True

    @extend_schema(
        operation_id="messages_peek",
        extensions=raises("INVALID_SEQ", "INVALID_VALUE"),
        responses=s.PeekOutput,
        summary="Peek or replay messages; never moves the cursor",
    )
    @query_parameters(
        OpenApiParameter(
            "after",
            openapi.seq(),
            description="return messages after this seq (ascending)",
        ),
        openapi.limit_parameter(
            selectors.PEEK_MAX,
            f"default {selectors.PEEK_DEFAULT}, at most {selectors.PEEK_MAX}; "
            "a response also stops at AGENTCHAT_READ_MAX_BYTES of messages (always at "
            "least one), `more: true` saying messages were left out (later ones with "
            "`after`, earlier ones without)",
        ),
    )
    def get(self, request: AgentRequest, name: str) -> HttpResponse:
        after, limit = peek_window(request)
        channel = selectors.channel_get(name, viewer=request.user.name)
        page = selectors.message_peek(
            channel=channel, after=after, limit=limit, max_bytes=settings.AGENTCHAT_READ_MAX_BYTES
        )
        cursor = selectors.cursor_get(agent=request.user, channel=channel)
        # Each message's JSON as made once (message_json), assembled as the read's page is.
        body = b"".join(
            (
                b'{"messages":[',
                b",".join(records.message_json(message) for message in page.messages),
                b'],"cursor":',
                json_bytes(cursor),
                b',"more":',
                json_bytes(page.more),
                b"}",
            )
        )
        return HttpResponse(body, content_type="application/json")

    @extend_schema(
        operation_id="messages_post",
        extensions=raises(
            *s.INPUT_CODES,
            "INVALID_NAME",
            "SENDER_MISMATCH",
            "REPLY_TO_NOT_FOUND",
            "ID_CONFLICT",
            "STATUS_RESERVED",
        ),
        request=s.MessagePostInput,
        responses={201: s.MessageOutput, 200: s.MessageOutput},
        summary="Post a message (201; 200 for an idempotent retry with the same id)",
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> HttpResponse:
        data = s.MessagePostInput.validate_input(request.data)
        poster = posted_as(request, name, data)
        message, created = services.message_post(**poster, message_id=data.pop("id", None), **data)
        # The bytes message_post measured (json_size): not rendered a second time.
        return created_json(records.message_json(message), created)


class MessageReadApi(APIView):
    answer_is_delivery = True  # the lane tells it when its client leaves (request_abandoned)

    @extend_schema(
        request=None,
        responses=s.ReadOutput,
        operation_id="channels_read",
        extensions=raises("UNKNOWN_FIELD", "INVALID_VALUE"),
        summary="Read relevant messages after the cursor and advance it",
        description=(
            "Relevant messages after the caller's cursor, a page at a time. With `more: true` "
            "relevant messages remain and the cursor stands on the last one returned: read "
            "again. Otherwise the cursor moves to the channel's last seq."
        ),
    )
    @query_parameters(
        openapi.limit_parameter(
            selectors.READ_LIMIT_MAX,
            "at most this many messages; a response also stops at AGENTCHAT_READ_MAX_BYTES of "
            "messages (always at least one)",
            default=selectors.READ_LIMIT_MAX,
        ),
    )
    def post(self, request: AgentRequest, name: str) -> HttpResponse:
        s.EmptyInput.validate_input(request.data)
        limit = limit_param(
            request, maximum=selectors.READ_LIMIT_MAX, default=selectors.READ_LIMIT_MAX
        )
        channel = selectors.channel_get(name, viewer=request.user.name)
        page = services.message_read(
            channel=channel, agent=request.user, limit=limit, abandoned=request_abandoned(request)
        )
        # The messages were rendered before the cursor moved; the body only assembles them.
        return HttpResponse(services.read_page_body(page), content_type="application/json")


class CursorAckApi(APIView):
    @extend_schema(
        operation_id="channels_ack",
        extensions=raises("UNKNOWN_FIELD", "INVALID_TYPE", "INVALID_SEQ"),
        request=s.AckInput,
        responses=s.AckOutput,
        summary="Move the cursor without reading",
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        data = s.AckInput.validate_input(request.data)
        channel = selectors.channel_get(name, viewer=request.user.name)
        return Response(
            {"cursor": services.cursor_ack(channel=channel, agent=request.user, seq=data["seq"])}
        )


class MarkerClaimApi(APIView):
    @extend_schema(
        request=None,
        responses={201: s.ClaimOutput},
        operation_id="markers_claim",
        extensions=raises("UNKNOWN_FIELD", "INVALID_NAME", "MARKER_ALREADY_CLAIMED"),
        summary="Claim a marker: exactly one agent wins, others get MARKER_ALREADY_CLAIMED",
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str, marker: str) -> Response:
        s.EmptyInput.validate_input(request.data)
        channel = selectors.channel_get(name, viewer=request.user.name)
        claim = services.marker_claim(
            channel=channel,
            marker=marker,
            owner=request.user.name,
            budgeted=request.user.kind == Agent.Kind.AGENT,
        )
        return Response(
            {
                "channel": channel.name,
                "marker": claim.marker,
                "owner": claim.owner,
                "claimed_at": claim.claimed_at.isoformat(),
            },
            status=http.HTTP_201_CREATED,
        )


EVENT_CODES = (
    "EVENT_INVALID_TYPE",
    "EVENT_UNKNOWN_FIELD",
    "EVENT_REQUIRED_FIELD_MISSING",
    "EVENT_INVALID_TEXT",
    "EVENT_INVALID_PRIMITIVES",
    "EVENT_DUPLICATE_PRIMITIVE",
    "EVENT_UNKNOWN_PRIMITIVE",
    "EVENT_INVALID_STATUS",
    "FIELD_TOO_LARGE",
)


class EventListPostApi(APIView):
    heavy_methods = ("GET",)

    @extend_schema(
        operation_id="events_read",
        extensions=raises("EVENT_INVALID_TYPE", "INVALID_SEQ", "INVALID_VALUE"),
        responses=s.EventListOutput,
        summary="Read capability and status events (like peek: never moves the cursor)",
        description=(
            "The channel's events, ascending by seq: the first `limit` after `after`, or the "
            "last `limit` without it. Only event messages (posted here) count; ordinary "
            "messages never do. `more`: further events exist (after these with `after`, "
            "before them without)."
        ),
    )
    @query_parameters(
        OpenApiParameter(
            "type",
            {"type": "string", "enum": list(events.TYPES)},
            description="only events of this type (else 400 EVENT_INVALID_TYPE)",
        ),
        OpenApiParameter("after", openapi.seq(), description="events after this seq (ascending)"),
        openapi.limit_parameter(
            selectors.EVENTS_MAX,
            f"default {selectors.EVENTS_DEFAULT}, at most {selectors.EVENTS_MAX}",
        ),
    )
    def get(self, request: AgentRequest, name: str) -> Response:
        kind = request.query_params.get("type")
        after, limit = peek_window(request)
        channel = selectors.channel_get(name, viewer=request.user.name)
        items, more = selectors.events_read(
            channel=channel, viewer=request.user.name, type=kind, after=after, limit=limit
        )
        return Response(
            {"events": [records.event_item_to_dict(*item) for item in items], "more": more}
        )

    @extend_schema(
        operation_id="events_post",
        extensions=raises(*EVENT_CODES, "INVISIBLE_CHARACTER"),
        request={"application/json": s.EVENT_POST_SCHEMA},
        responses={201: s.EventItemOutput},
        summary="Post a capability or status event",
        description=(
            "`{type: capability, harness, primitives?}` (default: all eight primitives) or "
            "`{type: status, harness, status, detail?}`; a null field is an omitted one. The "
            "server fills `schema_version` (1), `agent` (the caller) and `ts` (now, UTC, to the "
            "second), validates the event against the shipped schema "
            "(`channels_app/schemas/agent-chat-event.schema.json`) and posts it as a broadcast "
            "message (`status: event.<type>`, `title: event:<type>`, kind `event`, the body the "
            "compact JSON of the event, as the reference CLI writes it). A violation is 400 "
            "with the reference's EVENT_* code, in its check order: type, unknown fields, "
            "harness, then the primitives or the status and detail; then INVISIBLE_CHARACTER "
            "for an invisible or direction-changing character in the harness or detail."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        data = request.data
        if not isinstance(data, dict):
            raise AppError("INVALID_JSON", "request body must be a JSON object")
        channel = selectors.channel_get(name, viewer=request.user.name)
        event = events.event_request_parse(data, agent=request.user.name)
        posted = services.event_post(channel=channel, agent=request.user.name, request=event)
        return Response(
            records.event_item_to_dict(posted.message.seq, posted.message.id, posted.event),
            status=http.HTTP_201_CREATED,
        )


class PresenceApi(APIView):
    heavy = True

    @extend_schema(
        operation_id="channels_presence",
        responses=s.PresenceListOutput,
        summary="Presence: each agent's latest status event and last activity in the channel",
        description=(
            "One entry per agent that sent something in the channel or has a cursor there, "
            "by name: its latest status event (`status`, `detail`, `status_ts`, "
            "`status_seq`), its latest capability event (`primitives`, `capability_seq`), the "
            "harness of its latest event, the last message or event it sent (`last_seq`, "
            "`last_sent_at`), its cursor and the cursor's last move (`last_read_at`: a read, "
            "wait or ack), and `last_active_at`, the later of the two. Null where there is none."
        ),
    )
    @query_parameters()
    def get(self, request: AgentRequest, name: str) -> Response:
        channel = selectors.channel_get(name, viewer=request.user.name)
        items = selectors.presence_list(channel=channel, viewer=request.user.name)
        return Response({"presence": [records.presence_to_dict(*item) for item in items]})


class ApprovalsApi(APIView):
    heavy = True

    @extend_schema(
        operation_id="approvals_pending",
        responses=s.ApprovalListOutput,
        extensions=raises("INVALID_VALUE"),
        summary="Pending approval requests in every channel the caller may see",
        description=(
            "A request is a message with status `needs-approval`; it is pending until a reply "
            "to it (`reply_to`) with status `approved` or `rejected` exists from a person "
            "(`sender_kind` human, as the server stamped it; never an imported message) other "
            "than the requester — the channel's maintainer when the channel names one. Any "
            "other answer is a comment. Oldest first, at most `limit` and about "
            "AGENTCHAT_READ_MAX_BYTES of JSON (always at least one); `more` says the page was "
            "cut, and `next` (only then) is the cursor to pass as `after` for the next page."
        ),
    )
    @query_parameters(
        openapi.limit_parameter(approvals.APPROVALS_MAX, "at most this many (default 100)"),
        OpenApiParameter(
            "after",
            {
                "type": "string",
                "pattern": approvals.CURSOR_PATTERN,
                "maxLength": approvals.CURSOR_MAX,
            },
            description="start after this cursor (exclusive): the previous page's `next`",
        ),
    )
    def get(self, request: AgentRequest) -> Response:
        limit = limit_param(request, maximum=approvals.APPROVALS_MAX, default=100)
        after = request.query_params.get("after") or None
        pending, more = approvals.approvals_pending(
            viewer=request.user.name, limit=limit, after=after
        )
        answer: dict[str, object] = {
            "approvals": [records.approval_to_dict(m) for m in pending],
            "more": more,
        }
        if more and pending:
            answer["next"] = approvals.approval_cursor(pending[-1])
        return Response(answer)


class SearchApi(APIView):
    heavy = True

    @extend_schema(
        operation_id="messages_search",
        responses=s.SearchOutput,
        extensions=raises(
            "INVALID_VALUE",
            "SEARCH_TOO_BROAD",
            "CHANNEL_NOT_FOUND",
            "INVALID_NAME",
        ),
        summary="Search messages (title and body) in the channels the caller may see",
        description=(
            f"Every word of `q` must appear (whole words; on SQLite `word*` matches a prefix "
            f"of at least {words.SEARCH_PREFIX_MIN} characters, at most "
            f"{words.SEARCH_PREFIXES_MAX} prefixes a query, else 400 SEARCH_TOO_BROAD); "
            f"at most {words.SEARCH_TERMS_MAX} words, {words.SEARCH_QUERY_MAX} characters. "
            "Newest first, at most `limit` and about AGENTCHAT_READ_MAX_BYTES of JSON (always "
            "at least one); `more` says the page was cut. Full-text search of the database "
            "(SQLite FTS5, PostgreSQL to_tsvector), a plain match elsewhere."
        ),
    )
    @query_parameters(
        OpenApiParameter(
            "q",
            {"type": "string", "minLength": 1, "maxLength": words.SEARCH_QUERY_MAX},
            required=True,
            description=f"the words to find: at least one, at most {words.SEARCH_TERMS_MAX} "
            f"of at most {words.SEARCH_TERM_MAX} characters (400 INVALID_VALUE otherwise)",
        ),
        OpenApiParameter("channel", str, description="search this channel only"),
        openapi.limit_parameter(search.SEARCH_LIMIT_MAX, "at most this many (default 50)"),
    )
    def get(self, request: AgentRequest) -> Response:
        limit = limit_param(request, maximum=search.SEARCH_LIMIT_MAX, default=50)
        name = request.query_params.get("channel")
        channel = selectors.channel_get(name, viewer=request.user.name) if name else None
        found, more = search.messages_search(
            viewer=request.user.name,
            query=request.query_params.get("q", ""),
            channel=channel,
            limit=limit,
        )
        return Response({"results": [records.message_to_dict(m) for m in found], "more": more})
