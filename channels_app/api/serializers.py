"""Input and output shapes of the channels API (inputs are strict: see agentchat.core.http.rest)."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentchat.core.http import schema as openapi
from agentchat.core.http.pages import PageOutput
from agentchat.core.http.rest import (
    AnyJSONField,
    Documented,
    KeywordFieldsMetaclass,
    StrictCharField,
    StrictDictField,
    StrictIntegerField,
    StrictListField,
    StrictSerializer,
)
from channels_app import events
from channels_app.models import Channel
from channels_app.services import (
    MEMBERS_MAX,
    MESSAGE_ID_MAX,
    RECIPIENTS_MAX,
    STATUS_MAX,
    TITLE_MAX,
    TOPIC_MAX,
)

# The codes of the input serializers (agentchat.core.http.rest.StrictSerializer), for raises().
INPUT_CODES = ("UNKNOWN_FIELD", "MISSING_FIELD", "INVALID_TYPE", "INVALID_VALUE", "FIELD_TOO_LARGE")


def reply_to_field() -> StrictIntegerField:
    """A post's optional ``reply_to``: the seq of a message of its channel (the service
    refuses another with REPLY_TO_NOT_FOUND)."""
    return StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        min_value=1,
        help_text="the seq of a message of this channel (else REPLY_TO_NOT_FOUND)",
    )


def claimed_sender_field(whose: str) -> StrictCharField:
    """A post's optional ``from`` (declare it as ``from_``: "from" on the wire, by
    KeywordFieldsMetaclass); the view checks it against ``whose`` agent (``sender_check``)."""
    return StrictCharField(
        single_line=True,
        required=False,
        help_text=f"optional; must equal {whose} (else 403 SENDER_MISMATCH)",
        openapi=openapi.AGENT_NAME,
    )


# A recipient named in a list: an agent name, but not a broadcast word.
_RECIPIENT = r"(?!(?:all)(?: |,|$))[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?"
_PIECE = rf"(?: *(?:{_RECIPIENT})? *)"
RECIPIENTS_SCHEMA = {
    "oneOf": [
        {
            "type": "string",
            "pattern": rf"^(?: *(?:all|\*) *|{_PIECE}(?:,{_PIECE})*)$",
            "description": "all, *, one agent name, or a comma list of names",
        },
        {
            "type": "array",
            "items": {**openapi.AGENT_NAME, "pattern": f"^{_RECIPIENT}$"},
            "maxItems": RECIPIENTS_MAX,
            "description": "agent names; [] is a broadcast",
        },
    ],
    "nullable": True,
}


class RecipientsField(Documented, serializers.JSONField):
    """``to``: one agent name, a list of names, or all / * / omitted for a broadcast."""

    def to_internal_value(self, data: Any) -> Any:
        if data is None or isinstance(data, str):
            return data
        if isinstance(data, list) and all(isinstance(item, str) for item in data):
            return data
        raise serializers.ValidationError("must be a name or a list of names", code="INVALID_TYPE")


class VisibilityField(serializers.ChoiceField):
    """``open`` or ``members``; a JSON string only (ChoiceField alone would match ``str(x)``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(choices=Channel.Visibility.values, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            raise serializers.ValidationError("must be a string", code="INVALID_TYPE")
        return super().to_internal_value(data)


VISIBILITY_HELP = (
    "open (default): every agent sees the channel; members: only the agents on `members` — "
    "to anyone else it does not exist (404 CHANNEL_NOT_FOUND, absent from lists)"
)
MEMBERS_HELP = (
    f"agent names, at most {MEMBERS_MAX}; on a members-only channel, who may see it (the "
    "agent that makes a channel members-only is added when missing)"
)


def _topic_field(**default: Any) -> StrictCharField:
    """A channel's topic, optional (``default``: a create's), as a create and an update take it."""
    return StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        max_length=TOPIC_MAX,
        openapi=openapi.one_line(max_length=TOPIC_MAX),
        help_text="one line, like a title (no control character or line separator)",
        **default,
    )


def _members_field(**default: Any) -> StrictListField:
    """A channel's members, optional (``default``: a create's), as a create and an update take
    them."""
    return StrictListField(
        child=StrictCharField(trim_whitespace=False, openapi=openapi.AGENT_NAME),
        required=False,
        max_length=MEMBERS_MAX,
        help_text=MEMBERS_HELP,
        **default,
    )


class ChannelCreateInput(StrictSerializer):
    name = StrictCharField(
        trim_whitespace=False,
        allow_blank=True,
        openapi=openapi.CHANNEL_NAME,
        help_text="[A-Za-z0-9][A-Za-z0-9._-]*, at most 64, unique ignoring case; not a name a "
        "synced folder cannot hold (state.md, Windows device names such as CON or nul.txt, a "
        "trailing dot)",
    )
    topic = _topic_field(default="")
    members = _members_field(default=list)
    visibility = VisibilityField(
        required=False, default=Channel.Visibility.OPEN, help_text=VISIBILITY_HELP
    )


class ChannelUpdateInput(StrictSerializer):
    topic = _topic_field()
    members = _members_field()
    visibility = VisibilityField(required=False, help_text=VISIBILITY_HELP)


class ChannelOutput(serializers.Serializer):
    name = serializers.CharField()
    topic = serializers.CharField()
    members = serializers.ListField(child=serializers.CharField())
    created_at = serializers.DateTimeField()
    created_by = serializers.CharField()
    last_seq = serializers.IntegerField()
    visibility = serializers.ChoiceField(choices=Channel.Visibility.values)
    cursor = serializers.IntegerField(required=False, help_text="the caller's cursor")
    unread = serializers.IntegerField(required=False, help_text="relevant messages after it")


class ChannelListOutput(PageOutput):
    channels = ChannelOutput(many=True)


class MessagePostInput(StrictSerializer):
    id = StrictCharField(
        single_line=True,
        required=False,
        help_text="client id: a retry with it is idempotent",
        openapi=openapi.record_id(MESSAGE_ID_MAX),
    )
    # `from` is a Python keyword: declared below.
    to = RecipientsField(required=False, allow_null=True, default=None, openapi=RECIPIENTS_SCHEMA)
    reply_to = reply_to_field()
    status = StrictCharField(
        single_line=True,
        required=False,
        default="discussion",
        openapi=openapi.one_line(max_length=STATUS_MAX, non_blank=True),
    )
    title = StrictCharField(
        single_line=True,
        trim_whitespace=False,
        allow_blank=True,
        openapi=openapi.one_line(max_length=TITLE_MAX, non_blank=True),
    )
    body = StrictCharField(
        required=False,
        allow_blank=True,
        trim_whitespace=False,
        default="",
        help_text=openapi.FIELD_BYTES_HELP,
        openapi={"maxLength": openapi.FIELD_MAX_CHARS},
    )
    conversation_id = StrictCharField(single_line=True, required=False, default="", max_length=128)
    correlation_id = StrictCharField(single_line=True, required=False, default="", max_length=128)
    # A field named like Serializer.data (the metaclass moves it to _declared_fields).
    data = AnyJSONField(  # type: ignore[assignment]
        required=False, allow_null=True, default=None, help_text=openapi.JSON_VALUE_HELP
    )
    content_type = StrictCharField(single_line=True, required=False, default="", max_length=200)
    metadata = StrictDictField(
        child=StrictCharField(allow_blank=True),
        required=False,
        default=dict,
        help_text="string values; each key one line (no line separator or control character)",
    )
    from_ = claimed_sender_field("the token's agent")


class MessageOutput(serializers.Serializer, metaclass=KeywordFieldsMetaclass):
    seq = serializers.IntegerField()
    id = serializers.CharField()
    channel = serializers.CharField()
    sender_kind = serializers.ChoiceField(
        choices=["agent", "human"],
        help_text="provenance: whether a person or an agent sent it, from the sender's identity "
        "on the server (never from the request); always agent for an imported message",
    )
    imported = serializers.BooleanField(
        required=False,
        help_text="present (true) only on a message imported from a folder (import_folder): "
        "its sender, status and text are what the file said, vouched for by no identity here",
    )
    to = serializers.ListField(child=serializers.CharField(), help_text="[] = broadcast")
    reply_to = serializers.IntegerField(allow_null=True)
    status = serializers.CharField()
    title = serializers.CharField()
    body = serializers.CharField()
    ts = serializers.DateTimeField()
    kind = serializers.CharField()
    conversation_id = serializers.CharField(allow_null=True)
    correlation_id = serializers.CharField(allow_null=True)
    data = serializers.JSONField(allow_null=True)  # type: ignore[assignment]  # as above
    content_type = serializers.CharField(allow_null=True)
    metadata = serializers.DictField(child=serializers.CharField())
    from_ = serializers.CharField()  # "from" on the wire (KeywordFieldsMetaclass)


class MessageListOutput(serializers.Serializer):
    messages = MessageOutput(many=True)
    cursor = serializers.IntegerField()


class PeekOutput(MessageListOutput):
    more = serializers.BooleanField(
        help_text="the byte budget or the limit left messages out: later ones (with `after`), "
        "else earlier ones"
    )


class ReadOutput(MessageListOutput):
    more = serializers.BooleanField(
        help_text="relevant messages remain: the cursor stands on the last one returned"
    )


class EmptyInput(StrictSerializer):
    """Endpoints that take no body (or an empty object)."""


class AckInput(StrictSerializer):
    seq = StrictIntegerField(
        required=False,
        allow_null=True,
        default=None,
        openapi={"minimum": 0},
        help_text="at most the channel's last seq (else INVALID_SEQ); null or omitted: the last",
    )


class AckOutput(serializers.Serializer):
    cursor = serializers.IntegerField()


class ClaimOutput(serializers.Serializer):
    channel = serializers.CharField()
    marker = serializers.CharField()
    owner = serializers.CharField()
    claimed_at = serializers.DateTimeField()


# --- events and presence ----------------------------------------------------------------------

_IDENTITY = {
    "type": "string",
    "minLength": 1,
    # Neither '.' nor '_' first (so neither '.' nor '..'); no control character, '/', '\', ':'.
    "pattern": r"^(?![._])[^\x00-\x1f\x7f-\x9f\u2028\u2029/\\:]+$",
    "description": "non-empty; no control character (U+0000-U+001F, U+007F-U+009F), line or "
    "paragraph separator (U+2028, U+2029), '/', "
    "'\\' or ':'; not starting with '.' or '_' (else 400 EVENT_INVALID_TEXT)",
}
EVENT_POST_SCHEMA = {
    "oneOf": [
        {
            "type": "object",
            "title": "CapabilityEventInput",
            "properties": {
                "type": {"type": "string", "enum": ["capability"]},
                "harness": _IDENTITY,
                "primitives": {
                    "type": "array",
                    "minItems": 1,
                    "maxItems": len(events.PRIMITIVES),
                    "uniqueItems": True,
                    "items": {"type": "string", "enum": list(events.PRIMITIVES)},
                    "description": "default: all eight, in this order",
                },
            },
            "required": ["type", "harness"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "title": "StatusEventInput",
            "properties": {
                "type": {"type": "string", "enum": ["status"]},
                "harness": _IDENTITY,
                "status": {"type": "string", "enum": list(events.STATUSES)},
                "detail": {
                    "type": "string",
                    "pattern": r"^[^\x00-\x1f\x7f-\x9f\u2028\u2029]*$",
                    "description": "one line of free text without control characters or line "
                    "separators (U+2028, U+2029); may be empty",
                },
            },
            "required": ["type", "harness", "status"],
            "additionalProperties": False,
        },
    ]
}
EVENT_OBJECT_SCHEMA = {
    "type": "object",
    "description": "the event (schemas/agent-chat-event.schema.json): schema_version, event, "
    "agent, harness, ts, and primitives (capability) or status and detail? (status)",
    "properties": {
        "schema_version": {"type": "integer", "enum": [1]},
        "event": {"type": "string", "enum": list(events.TYPES)},
        "agent": {"type": "string"},
        "harness": {"type": "string"},
        "ts": {"type": "string"},
        "primitives": {"type": "array", "items": {"type": "string"}},
        "status": {"type": "string", "enum": list(events.STATUSES)},
        "detail": {"type": "string"},
    },
    "required": ["schema_version", "event", "agent", "harness", "ts"],
}


class EventJSONField(Documented, serializers.JSONField):
    pass


class EventItemOutput(serializers.Serializer):
    seq = serializers.IntegerField(help_text="the seq of the message the event rode in")
    id = serializers.CharField(help_text="that message's id")
    event = EventJSONField(openapi=EVENT_OBJECT_SCHEMA)


class EventListOutput(serializers.Serializer):
    events = EventItemOutput(many=True)
    more = serializers.BooleanField(
        help_text="with `after`: events after these exist; without: events before these"
    )


class PresenceOutput(serializers.Serializer):
    agent = serializers.CharField()
    # Not an enum in the schema: drf-spectacular names enums by field name, and this one would
    # rename the tasks' StatusEnum.
    status = serializers.CharField(
        allow_null=True, help_text=f"one of {', '.join(events.STATUSES)}; null before any"
    )
    detail = serializers.CharField(allow_null=True)
    status_ts = serializers.CharField(allow_null=True, help_text="the status event's ts")
    status_seq = serializers.IntegerField(allow_null=True)
    harness = serializers.CharField(allow_null=True, help_text="from the latest event")
    primitives = serializers.ListField(child=serializers.CharField(), allow_null=True)
    capability_seq = serializers.IntegerField(allow_null=True)
    last_seq = serializers.IntegerField(allow_null=True, help_text="the last message or event sent")
    last_sent_at = serializers.DateTimeField(allow_null=True)
    cursor = serializers.IntegerField(allow_null=True)
    last_read_at = serializers.DateTimeField(
        allow_null=True, help_text="the cursor's last move (read, wait or ack)"
    )
    last_active_at = serializers.DateTimeField(allow_null=True)


class PresenceListOutput(serializers.Serializer):
    presence = PresenceOutput(many=True)


class ApprovalOutput(serializers.Serializer):
    request = MessageOutput()
    maintainer = serializers.CharField(
        allow_null=True,
        help_text="who decides: only this agent's answer counts (null: anyone's answer counts)",
    )


class ApprovalListOutput(serializers.Serializer):
    approvals = ApprovalOutput(many=True)
    more = serializers.BooleanField()
    next = serializers.CharField(
        required=False, help_text="present when `more`: pass it as `after` for the next page"
    )


class SearchOutput(serializers.Serializer):
    results = MessageOutput(many=True)
    more = serializers.BooleanField()
