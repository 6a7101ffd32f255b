"""EP-0118 signals over REST: ``channels/<name>/signals/`` (send, read) and ``…/signals/ack/``
(docs/signals.md). Thin: parse → service/selector → serialize."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http import schema as openapi
from agentchat.core.http.query import query_parameters
from agentchat.core.http.rest import (
    KeywordFieldsMetaclass,
    StrictCharField,
    StrictListField,
    StrictSerializer,
)
from agentchat.core.http.schema import raises
from agentchat.core.identity.auth import AgentRequest
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from channels_app import selectors, services, signals
from channels_app.api.serializers import INPUT_CODES, claimed_sender_field, reply_to_field
from channels_app.api.views import after_seq_param, created_json, limit_param, posted_as

TAG = ["signals"]
# Text without NUL holding something besides whitespace (Python's, which the service strips).
_WHITESPACE = r"\t\n\x0b\x0c\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
NON_BLANK_TEXT_PATTERN = rf"^[^\x00]*[^\x00{_WHITESPACE}][^\x00]*$"
BOOLEAN_WORDS = {"1": True, "true": True, "0": False, "false": False}
SIGNAL_TO_SCHEMA = {
    "type": "string",
    # * or all (everyone), else an agent name (a sub-agent's dotted name among them).
    "pattern": r"^(?:\*|[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?)$",
    "minLength": 1,
    "maxLength": 64,
    "description": "one agent name (a sub-agent's dotted name among them), or * (all) for "
    "everyone in the channel",
}


class SignalPostInput(StrictSerializer):
    id = StrictCharField(
        single_line=True,
        required=False,
        help_text="client id: a retry with it is idempotent",
        openapi=openapi.record_id(services.MESSAGE_ID_MAX),
    )
    to = StrictCharField(trim_whitespace=False, openapi=SIGNAL_TO_SCHEMA)
    content = StrictCharField(
        allow_blank=True,
        trim_whitespace=False,
        help_text="the signal's text (the message's body; its first line titles it). "
        + openapi.FIELD_BYTES_HELP,
        # No maxLength: the limit is bytes (in the help), and schemathesis's coverage phase
        # makes no valid body for a required string with a pattern and a maxLength this long.
        openapi={"pattern": NON_BLANK_TEXT_PATTERN},
    )
    type = StrictCharField(
        required=False,
        default="inform",
        help_text="the signal's type (also the message's status)",
        openapi={"type": "string", "enum": list(services.SIGNAL_TYPES)},
    )
    reply_to = reply_to_field()
    from_ = claimed_sender_field("the acting agent")


class SignalOutput(serializers.Serializer, metaclass=KeywordFieldsMetaclass):
    id = serializers.CharField(help_text="the message's id: what ack takes")
    seq = serializers.IntegerField()
    channel = serializers.CharField()
    ts = serializers.DateTimeField()
    from_ = serializers.CharField()  # "from" on the wire (KeywordFieldsMetaclass)
    sender_kind = serializers.ChoiceField(choices=["agent", "human"])
    to = serializers.CharField(help_text="the recipient, or * for everyone")
    type = serializers.ChoiceField(choices=list(services.SIGNAL_TYPES))
    content = serializers.CharField()
    reply_to = serializers.IntegerField(allow_null=True)
    read_at = serializers.DateTimeField(
        allow_null=True, help_text="when the caller acknowledged it; null: unread"
    )


class SignalListOutput(serializers.Serializer):
    signals = SignalOutput(many=True)
    more = serializers.BooleanField(help_text="signals remain after these: ask with `after`")
    next = serializers.IntegerField(
        allow_null=True, help_text="with `more`: the last one's seq, to pass as `after`"
    )


class SignalAckInput(StrictSerializer):
    ids = StrictListField(
        child=StrictCharField(openapi=openapi.record_id(services.MESSAGE_ID_MAX)),
        min_length=1,
        max_length=services.ACK_IDS_MAX,
        help_text="the signals' ids (as read_signals lists them); duplicates count once",
    )


class SignalAckOutput(serializers.Serializer):
    acked = serializers.ListField(child=serializers.CharField(), help_text="marked read now")
    already_read = serializers.ListField(
        child=serializers.CharField(), help_text="read before: an ack is idempotent"
    )


def _unread_only(request: AgentRequest) -> bool:
    raw = request.query_params.get("unread_only")
    if raw is None:
        return True
    if raw not in BOOLEAN_WORDS:
        raise AppError(
            "INVALID_VALUE",
            "unread_only must be true, false, 1 or 0",
            detail={"field": "unread_only", "value": raw[:40]},
        )
    return BOOLEAN_WORDS[raw]


class SignalListPostApi(APIView):
    heavy_methods = ("GET",)  # a page of up to AGENTCHAT_READ_MAX_BYTES, as a peek

    @extend_schema(
        tags=TAG,
        operation_id="signals_read",
        responses=SignalListOutput,
        extensions=raises("INVALID_SEQ"),
        summary="read_signals: the caller's signals, unread ones by default; changes nothing",
        description=(
            "The signals of the channel relevant to the caller (to it, to one of its "
            "sub-agents, or to `*`; never its own), ascending by seq: only those it has not "
            "acknowledged (`unread_only`, the default), or all with their `read_at`. A pure "
            "query: no cursor moves, no marker is written, so asking twice answers the same. "
            "A page holds at most `limit` signals and AGENTCHAT_READ_MAX_BYTES (always one); "
            "with `more: true` ask again with `after` = `next`."
        ),
    )
    @query_parameters(
        OpenApiParameter(
            "unread_only",
            {"type": "string", "enum": sorted(BOOLEAN_WORDS), "default": "true"},
            description="true (default): the signals not acknowledged; false: all of them",
        ),
        OpenApiParameter("after", openapi.seq(), description="signals after this seq"),
        openapi.limit_parameter(
            signals.SIGNALS_MAX, f"default {signals.SIGNALS_DEFAULT}, at most {signals.SIGNALS_MAX}"
        ),
    )
    def get(self, request: AgentRequest, name: str) -> HttpResponse:
        unread_only = _unread_only(request)
        after = after_seq_param(request)
        limit = limit_param(request, maximum=signals.SIGNALS_MAX, default=signals.SIGNALS_DEFAULT)
        channel = selectors.channel_get(name, viewer=request.user.name)
        page = signals.signal_list(
            channel=channel,
            agent=request.user,
            unread_only=unread_only,
            after=after,
            limit=limit,
            max_bytes=settings.AGENTCHAT_READ_MAX_BYTES,
        )
        return HttpResponse(page.body(), content_type="application/json")

    @extend_schema(
        tags=TAG,
        operation_id="signals_send",
        request=SignalPostInput,
        responses={201: SignalOutput, 200: SignalOutput},
        extensions=raises(
            *INPUT_CODES,
            "SIGNAL_INVALID_TYPE",
            "INVALID_NAME",
            "SENDER_MISMATCH",
            "REPLY_TO_NOT_FOUND",
            "ID_CONFLICT",
        ),
        summary="signal: send a typed signal to an agent, a sub-agent or * (a message)",
        description=(
            "Posts a message of the channel from the caller, addressed to `to` (or a "
            "broadcast for `*`), whose status and `type` are the signal's type, body the "
            "content and title the content's first line: it shows in reads, waits, streams, "
            "the dashboard and the synced folder like any message. 201; 200 for a retry with "
            "the same `id`."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> HttpResponse:
        data = SignalPostInput.validate_input(request.data)
        message, created = services.signal_post(
            **posted_as(request, name, data),
            to=data["to"],
            content=data["content"],
            signal_type=data["type"],
            message_id=data.get("id"),
            reply_to=data["reply_to"],
        )
        if not message.signal_type:  # the id of a plain message, retried here
            raise AppError(
                "ID_CONFLICT",
                f"message id {message.id!r} is a message that is no signal",
                detail={"id": message.id},
            )
        return created_json(json_bytes(signals.signal_to_dict(message, read_at=None)), created)


class SignalAckApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="signals_ack",
        request=SignalAckInput,
        responses=SignalAckOutput,
        extensions=raises(*INPUT_CODES, "SIGNAL_NOT_FOUND", "SIGNAL_NOT_ADDRESSED"),
        summary="ack_signals: mark exactly these signals read, for the caller only",
        description=(
            "Marks each signal read for the caller (a per-message marker, not a cursor: the "
            "caller's other signals stay unread, and a broadcast stays unread for every other "
            "agent). All or nothing: an id that names no signal of the channel is 404 "
            "SIGNAL_NOT_FOUND, one addressed to another agent (or the caller's own) 403 "
            "SIGNAL_NOT_ADDRESSED, and then nothing is marked. Acknowledging again is no "
            "change (`already_read`)."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        data = SignalAckInput.validate_input(request.data)
        channel = selectors.channel_get(name, viewer=request.user.name)
        result = services.signal_ack(channel=channel, agent=request.user, ids=data["ids"])
        return Response({"acked": result.acked, "already_read": result.already_read})
