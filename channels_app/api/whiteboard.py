"""EP-0118's whiteboard over REST: ``channels/<name>/whiteboard/`` (the list) and
``…/whiteboard/<key>/`` (GET, PUT, DELETE); docs/signals.md. Thin: parse → service/selector →
serialize."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework import status as http
from rest_framework.views import APIView

from agentchat.core.http import pages
from agentchat.core.http import schema as openapi
from agentchat.core.http.pages import PageOutput
from agentchat.core.http.query import query_parameters
from agentchat.core.http.rest import AnyJSONField, StrictSerializer
from agentchat.core.http.schema import raises
from agentchat.core.identity.auth import AgentRequest
from channels_app import selectors, services, whiteboard
from channels_app.api.serializers import INPUT_CODES

TAG = ["whiteboard"]
VALUE_CODES = ("INVALID_KEY", "INVALID_VALUE", "INVALID_TYPE", "FIELD_TOO_LARGE")


class WhiteboardWriteInput(StrictSerializer):
    # A field named like Serializer.data is moved by the metaclass; "value" is not.
    value = AnyJSONField(
        allow_null=True,
        help_text=f"any JSON, null included, of at most {whiteboard.VALUE_MAX_BYTES} bytes as "
        "compact UTF-8 JSON (else 413 FIELD_TOO_LARGE)",
    )


class WhiteboardEntryOutput(serializers.Serializer):
    key = serializers.CharField()
    value = serializers.JSONField(allow_null=True)
    updated_by = serializers.CharField(help_text="the agent whose write this value is")
    updated_at = serializers.DateTimeField(help_text="that write's time (its audit message's ts)")
    audit_seq = serializers.IntegerField(help_text="that write's whiteboard.written audit message")


class WhiteboardListOutput(PageOutput):
    entries = WhiteboardEntryOutput(many=True)


def _entry_response(entry: object, status: int = http.HTTP_200_OK) -> HttpResponse:
    return HttpResponse(
        whiteboard.entry_json(entry),  # type: ignore[arg-type]
        status=status,
        content_type="application/json",
    )


class WhiteboardListApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="whiteboard_list",
        responses=WhiteboardListOutput,
        extensions=raises("INVALID_VALUE", "INVALID_KEY"),
        summary="The channel's whiteboard entries, by key, a page at a time",
    )
    @query_parameters(
        *openapi.page_parameters(
            openapi.record_id(whiteboard.KEY_MAX), "the key of the previous page's `next`"
        )
    )
    def get(self, request: AgentRequest, name: str) -> HttpResponse:
        window = pages.window_parse(request.query_params, whiteboard.after_key_check)
        channel = selectors.channel_get(name, viewer=request.user.name)
        page = whiteboard.entry_list(channel=channel, viewer=request.user.name, window=window)
        return pages.page_response("entries", page)


class WhiteboardEntryApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="whiteboard_read",
        responses=WhiteboardEntryOutput,
        extensions=raises("INVALID_KEY", "KEY_NOT_FOUND"),
        summary="read_whiteboard: one entry (404 KEY_NOT_FOUND when there is none)",
    )
    @query_parameters()
    def get(self, request: AgentRequest, name: str, key: str) -> HttpResponse:
        channel = selectors.channel_get(name, viewer=request.user.name)
        return _entry_response(
            whiteboard.entry_get(channel=channel, key=key, viewer=request.user.name)
        )

    @extend_schema(
        tags=TAG,
        operation_id="whiteboard_write",
        request=WhiteboardWriteInput,
        responses={200: WhiteboardEntryOutput, 201: WhiteboardEntryOutput},
        extensions=raises(*INPUT_CODES, *VALUE_CODES, "JSON_TOO_DEEP", "WHITEBOARD_FULL"),
        summary="write_whiteboard: set a key (201 new, 200 replaced), audited",
        description=(
            "Sets the key to the value as the caller, with a broadcast `whiteboard.written` "
            "audit message in the same transaction. Concurrent writes of a channel's "
            "whiteboard are serialized: the last to commit wins, and its entry's `value`, "
            "`updated_by`, `updated_at` and `audit_seq` are that write's. A channel holds at "
            f"most {whiteboard.KEYS_MAX} keys and {whiteboard.BYTES_MAX} bytes of values "
            "(409 WHITEBOARD_FULL)."
        ),
    )
    @query_parameters()
    def put(self, request: AgentRequest, name: str, key: str) -> HttpResponse:
        whiteboard.key_check(key)
        data = WhiteboardWriteInput.validate_input(request.data)
        channel = selectors.channel_get(name, viewer=request.user.name)
        entry, created = services.whiteboard_write(
            channel=channel, key=key, value=data["value"], actor=request.user.name
        )
        return _entry_response(entry, http.HTTP_201_CREATED if created else http.HTTP_200_OK)

    @extend_schema(
        tags=TAG,
        operation_id="whiteboard_delete",
        request=None,
        responses={200: WhiteboardEntryOutput},
        extensions=raises("INVALID_KEY", "KEY_NOT_FOUND"),
        summary="Delete a key, audited (whiteboard.deleted); answers the entry as it was",
    )
    @query_parameters()
    def delete(self, request: AgentRequest, name: str, key: str) -> HttpResponse:
        channel = selectors.channel_get(name, viewer=request.user.name)
        return _entry_response(
            services.whiteboard_delete(channel=channel, key=key, actor=request.user.name)
        )
