"""Input and output shapes of the HTTP v1 API (``/v1/``): the document's requests, strict
(unknown fields are UNKNOWN_FIELD), and its envelope, deliveries, pages and cards."""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from agentchat.core.http import schema as openapi
from agentchat.core.http.pages import PageOutput
from agentchat.core.http.rest import (
    KeywordFieldsMetaclass,
    RawJSONField,
    StrictCharField,
    StrictListField,
    StrictSerializer,
)
from channels_app import envelopes as records

ENVELOPE_ID = openapi.PATH_PARAMETERS["message_id"]
THREAD_ID = {
    **openapi.one_line(max_length=records.THREAD_ID_MAX, non_blank=True),
    "nullable": True,
}
STRING_MAP = {
    "type": "object",
    "nullable": True,
    "maxProperties": records.MAP_ENTRIES_MAX,
    "additionalProperties": {
        "type": "string",
        "pattern": openapi.TEXT_PATTERN,
        "maxLength": records.MAP_VALUE_BYTES,
    },
    "description": f"at most {records.MAP_ENTRIES_MAX} entries: keys one line of 1-"
    f"{records.MAP_KEY_BYTES} bytes, values strings of at most {records.MAP_VALUE_BYTES} bytes "
    "(UTF-8)",
}


def _text(**kwargs: Any) -> StrictCharField:
    return StrictCharField(trim_whitespace=False, allow_blank=True, **kwargs)


def _optional_line(schema: dict[str, Any], **kwargs: Any) -> StrictCharField:
    return _text(single_line=True, required=False, allow_null=True, openapi=schema, **kwargs)


class EnvelopeSendInput(StrictSerializer):
    id = _text(
        single_line=True,
        required=False,
        openapi=ENVELOPE_ID,
        help_text="unique per sender: a retry with the same id and content returns the stored "
        "envelope (200), other content is 409 ID_CONFLICT; generated when omitted",
    )
    to = _text(single_line=True, openapi=openapi.AGENT_NAME, help_text="one existing agent")
    conversation_id = _optional_line(THREAD_ID, help_text="generated when omitted")
    correlation_id = _optional_line(THREAD_ID)
    text = _text(
        required=False,
        allow_null=True,
        help_text=openapi.FIELD_BYTES_HELP,
        openapi={"maxLength": openapi.FIELD_MAX_CHARS, "nullable": True},
    )
    # A field named like Serializer.data (the metaclass moves it to _declared_fields).
    data = RawJSONField(  # type: ignore[assignment]
        required=False, nullable=True, help_text=openapi.JSON_VALUE_HELP + " (compact)"
    )
    content_type = _optional_line(
        {**openapi.one_line(max_length=records.CONTENT_TYPE_MAX, non_blank=True), "nullable": True}
    )
    metadata = RawJSONField(required=False, nullable=True, openapi=STRING_MAP)
    from_ = _text(
        single_line=True,
        required=False,
        openapi=openapi.AGENT_NAME,
        help_text="optional; must be the path's agent, whose token this is (else 403 "
        "SENDER_MISMATCH)",
    )


class ReceiptSendInput(StrictSerializer):
    to = _text(
        single_line=True,
        required=False,
        openapi=openapi.AGENT_NAME,
        help_text="the original's sender (needed only when senders share the id)",
    )
    message_id = _text(single_line=True, openapi=ENVELOPE_ID, help_text="an envelope received")
    status = serializers.ChoiceField(choices=records.RECEIPT_STATUSES)
    detail = _text(
        required=False,
        allow_null=True,
        openapi={"maxLength": records.DETAIL_MAX, "nullable": True},
    )
    conversation_id = _optional_line(THREAD_ID, help_text="the original's when omitted")
    id = _text(single_line=True, required=False, openapi=ENVELOPE_ID, help_text="as a message's")


class ContactShareInput(StrictSerializer):
    to = _text(single_line=True, openapi=openapi.AGENT_NAME)
    contact_id = _text(single_line=True, openapi=openapi.AGENT_NAME)
    conversation_id = _optional_line(THREAD_ID, help_text="generated when omitted")


class ContactCardInput(StrictSerializer):
    id = _text(single_line=True, openapi=openapi.AGENT_NAME, help_text="the path's contact id")
    display_name = _optional_line(
        {**openapi.one_line(max_length=records.DISPLAY_NAME_MAX, non_blank=True), "nullable": True}
    )
    endpoint = _optional_line(
        {
            **openapi.one_line(max_length=records.ENDPOINT_MAX, non_blank=True),
            "pattern": records.ENDPOINT_PATTERN,
            "nullable": True,
        }
    )
    capabilities = StrictListField(
        child=_text(
            single_line=True,
            openapi=openapi.one_line(max_length=records.CAPABILITY_MAX, non_blank=True),
        ),
        required=False,
        allow_null=True,
        max_length=records.CAPABILITIES_MAX,
    )
    public_key = _optional_line(
        {**openapi.one_line(max_length=records.PUBLIC_KEY_MAX, non_blank=True), "nullable": True}
    )
    labels = RawJSONField(required=False, nullable=True, openapi=STRING_MAP)


class EmptyInput(StrictSerializer):
    """An acceptance takes no body (or an empty object)."""


class EnvelopeMessageOutput(serializers.Serializer):
    text = serializers.CharField(allow_null=True)
    data = serializers.JSONField(allow_null=True)  # type: ignore[assignment]
    content_type = serializers.CharField(allow_null=True)


class EnvelopeOutput(serializers.Serializer, metaclass=KeywordFieldsMetaclass):
    schema = serializers.ChoiceField(choices=[records.SCHEMA])
    id = serializers.CharField()
    kind = serializers.ChoiceField(choices=list(records.KINDS))
    from_ = serializers.CharField()
    to = serializers.CharField()
    conversation_id = serializers.CharField(allow_null=True)
    correlation_id = serializers.CharField(allow_null=True)
    created_at = serializers.DateTimeField()
    message = EnvelopeMessageOutput()
    metadata = serializers.DictField(child=serializers.CharField())


class DeliveryOutput(serializers.Serializer):
    seq_num = serializers.IntegerField(min_value=0)
    timestamp = serializers.DateTimeField()
    envelope = EnvelopeOutput()


class InboxOutput(serializers.Serializer):
    deliveries = DeliveryOutput(many=True)
    next_cursor = serializers.IntegerField(
        min_value=0, help_text="the next read's cursor: the last seq_num + 1"
    )
    tail = serializers.IntegerField(min_value=0, help_text="the next seq_num to be assigned")


class MonitorDeliveryOutput(DeliveryOutput):
    inbox = serializers.CharField()
    cursor = serializers.CharField(help_text="the monitor cursor after this delivery")


class MonitorOutput(serializers.Serializer):
    deliveries = MonitorDeliveryOutput(many=True)
    next_cursor = serializers.CharField(help_text="opaque: pass it back unchanged")
    tails = serializers.DictField(child=serializers.IntegerField(min_value=0))


class ContactCardOutput(serializers.Serializer):
    id = serializers.CharField()
    display_name = serializers.CharField(allow_null=True)
    endpoint = serializers.CharField(allow_null=True)
    capabilities = serializers.ListField(child=serializers.CharField())
    public_key = serializers.CharField(allow_null=True)
    labels = serializers.DictField(child=serializers.CharField())


class ContactListOutput(PageOutput):
    contacts = ContactCardOutput(many=True)


class ContactSourceOutput(serializers.Serializer, metaclass=KeywordFieldsMetaclass):
    kind = serializers.ChoiceField(choices=["put", "share"])
    from_ = serializers.CharField(required=False, help_text="a share's sender")
    message_id = serializers.CharField(required=False, help_text="the share's envelope id")


class ContactEventOutput(serializers.Serializer):
    seq_num = serializers.IntegerField(min_value=0)
    type = serializers.ChoiceField(choices=["contact.upsert"])
    timestamp = serializers.DateTimeField()
    contact = ContactCardOutput()
    # A field named like Field.source (the metaclass moves it to _declared_fields).
    source = ContactSourceOutput()  # type: ignore[assignment]


class AddressBookOutput(serializers.Serializer):
    events = ContactEventOutput(many=True)
    next_cursor = serializers.IntegerField(min_value=0)
    tail = serializers.IntegerField(min_value=0)
