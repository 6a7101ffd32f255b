"""The HTTP v1 API (the Agent Chat protocol v1 document), under ``/v1/``: thin views, through
the API lane like ``/api/v1/`` (the same token authentication, error table and request checks).

Every ``/v1/agents/<agent_id>/…`` path is its agent's own: the token must be ``<agent_id>``'s
(another agent's is 403 FORBIDDEN; the admin token is refused by authentication, 403
ADMIN_TOKEN_NOT_ALLOWED). ``/v1/monitor`` takes the admin token only
(``AdminTokenAuthentication``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http import pages
from agentchat.core.http import schema as openapi
from agentchat.core.http.query import Handler, query_parameters
from agentchat.core.http.rest import StrictSerializer
from agentchat.core.http.schema import raises
from agentchat.core.identity.auth import AdminTokenAuthentication, AgentRequest, sender_check
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name
from channels_app import contacts, envelopes, inbox, monitor
from channels_app.api.v1 import serializers as s
from channels_app.services import (
    Sent,
    contact_put,
    contact_share_accept,
    contact_share_send,
    envelope_send,
    receipt_send,
)

INPUT_CODES = ("UNKNOWN_FIELD", "MISSING_FIELD", "INVALID_TYPE", "INVALID_VALUE")
SEND_CODES = (*INPUT_CODES, "FIELD_TOO_LARGE", "INVALID_NAME", "FORBIDDEN", "AGENT_NOT_FOUND")
TAGS = ["v1"]

CURSOR_HELP = (
    "the next seq_num to read (a page's `next_cursor`, an event's `id`); 0 when omitted and no "
    "`Last-Event-ID` header is sent (this parameter wins over the header); beyond the tail: "
    "400 INVALID_CURSOR"
)
LIMIT = openapi.limit_parameter(
    envelopes.INBOX_LIMIT_MAX,
    "at most this many; a page also stops at about AGENTCHAT_READ_MAX_BYTES of JSON (always "
    "at least one): `next_cursor` below `tail` says more is there",
    default=envelopes.INBOX_LIMIT_DEFAULT,
)
SEQ_CURSOR = OpenApiParameter("cursor", openapi.seq(), description=CURSOR_HELP)
LAST_EVENT_ID = OpenApiParameter(
    "Last-Event-ID",
    {"type": "string", "pattern": r"^[0-9]{0,18}$"},
    location=OpenApiParameter.HEADER,
    description="the cursor, when the query names none (an SSE reconnect sends it)",
)
MONITOR_CURSOR = {
    "type": "string",
    "pattern": r"^[A-Za-z0-9_-]*={0,2}$",
    "maxLength": envelopes.MONITOR_CURSOR_MAX,
}


def operation(
    operation_id: str,
    raising: tuple[str, ...],
    parameters: tuple[OpenApiParameter, ...] = (),
    **schema: Any,
) -> Callable[[Handler], Handler]:
    """A v1 view method's schema (tagged v1, the codes it raises; ``schema``: the rest of
    ``extend_schema``'s arguments) and its query parameters, checked (``query_parameters``)."""
    described = extend_schema(
        operation_id=operation_id, tags=TAGS, extensions=raises(*raising), **schema
    )
    checked = query_parameters(*parameters)
    return lambda method: described(checked(method))


def made(output: Any) -> dict[int, Any]:
    """A write's answers: 201 with what it made, 200 with what it found made."""
    return {201: output, 200: output}


def owner_of(request: AgentRequest, agent_id: str) -> Agent:
    """The path's agent, who must be the token's. Raises FORBIDDEN."""
    agent = request.user
    if agent_id != agent.name:
        raise AppError(
            "FORBIDDEN",
            f"this token is {agent.name}'s: /v1/agents/{agent_id[:64]}/ is another agent's",
            detail={"agent": agent.name},
        )
    return agent


def owner_and_body(
    request: AgentRequest, agent_id: str, form: type[StrictSerializer]
) -> tuple[Agent, dict[str, Any]]:
    """A write's two checks, in this order: the path's agent is the token's (FORBIDDEN), and
    the body is what ``form`` takes (the input codes)."""
    return owner_of(request, agent_id), form.validate_input(request.data)


def limit_of(request: Request) -> int:
    return pages.limit_parse(
        request.query_params.get("limit"),
        maximum=envelopes.INBOX_LIMIT_MAX,
        default=envelopes.INBOX_LIMIT_DEFAULT,
    )


def cursor_text(request: Request) -> tuple[str | None, str]:
    """The cursor as sent, and where: ``cursor=`` wins over ``Last-Event-ID`` (an empty one
    counts as none, as every empty query parameter does)."""
    raw = request.query_params.get("cursor")
    if raw:
        return raw, "cursor"
    header = request.META.get("HTTP_LAST_EVENT_ID")
    return (header or None), "Last-Event-ID"


def json_response(body: bytes) -> HttpResponse:
    return HttpResponse(body, content_type="application/json")


def created_response(body: Any, created: bool) -> Response:
    """201 for what the request made, 200 for what it found made (a retry, a replaced card)."""
    return Response(body, status=http.HTTP_201_CREATED if created else http.HTTP_200_OK)


def sent_response(sent: Sent) -> Response:
    return created_response(sent.envelope(), sent.created)


class EnvelopeSendApi(APIView):
    @operation(
        "v1_messages_send",
        raising=(*SEND_CODES, "SENDER_MISMATCH", "INVISIBLE_CHARACTER", "ID_CONFLICT"),
        request=s.EnvelopeSendInput,
        responses=made(s.EnvelopeOutput),
        summary="Send a message envelope to one agent's inbox",
        description="201 with the stored envelope; 200 with the stored one for a retry of its "
        "`id` with the same content. Text and data are each at most 512 KiB (data as compact "
        "JSON), the body at most 768 KiB.",
    )
    def post(self, request: AgentRequest, agent_id: str) -> Response:
        sender, data = owner_and_body(request, agent_id, s.EnvelopeSendInput)
        sender_check(request, data.get("from"))
        return sent_response(
            envelope_send(
                sender=sender,
                to=data["to"],
                envelope_id=data.get("id"),
                conversation_id=data.get("conversation_id"),
                correlation_id=data.get("correlation_id"),
                text=data.get("text"),
                data=data.get("data"),
                content_type=data.get("content_type"),
                metadata=data.get("metadata"),
            )
        )


class InboxApi(APIView):
    heavy_methods = ("GET",)  # a page of up to AGENTCHAT_READ_MAX_BYTES

    @operation(
        "v1_inbox_read",
        raising=("FORBIDDEN", "INVALID_CURSOR", "INVALID_VALUE"),
        parameters=(SEQ_CURSOR, LIMIT, LAST_EVENT_ID),
        responses=s.InboxOutput,
        summary="Replay the caller's inbox from a cursor",
    )
    def get(self, request: AgentRequest, agent_id: str) -> HttpResponse:
        agent = owner_of(request, agent_id)
        raw, field = cursor_text(request)
        cursor = envelopes.inbox_cursor_parse(raw, field=field)
        page = inbox.inbox_page(agent=agent, cursor=cursor, limit=limit_of(request))
        return json_response(page.body())


class ReceiptSendApi(APIView):
    @operation(
        "v1_receipts_send",
        raising=(*SEND_CODES, "INVISIBLE_CHARACTER", "MESSAGE_NOT_FOUND", "ID_CONFLICT"),
        request=s.ReceiptSendInput,
        responses=made(s.EnvelopeOutput),
        summary="Send a receipt for an envelope the caller received",
        description="A new envelope of kind `receipt` in the original sender's inbox, "
        "`message.data` = `{message_id, status, detail}`; the original never changes. 404 "
        "MESSAGE_NOT_FOUND for an envelope the caller never received.",
    )
    def post(self, request: AgentRequest, agent_id: str) -> Response:
        sender, data = owner_and_body(request, agent_id, s.ReceiptSendInput)
        return sent_response(
            receipt_send(
                sender=sender,
                message_id=data["message_id"],
                status=data["status"],
                to=data.get("to"),
                detail=data.get("detail"),
                conversation_id=data.get("conversation_id"),
                envelope_id=data.get("id"),
            )
        )


class ContactListApi(APIView):
    heavy_methods = ("GET",)

    @operation(
        "v1_contacts_list",
        raising=("FORBIDDEN", "INVALID_VALUE", "INVALID_NAME"),
        parameters=(
            *openapi.page_parameters(
                openapi.AGENT_NAME, "the contact id of the previous page's `next`"
            ),
        ),
        responses=s.ContactListOutput,
        summary="List the caller's address book (cards by id, a page at a time)",
    )
    def get(self, request: AgentRequest, agent_id: str) -> HttpResponse:
        owner = owner_of(request, agent_id)
        window = pages.window_parse(
            request.query_params, lambda raw: check_agent_name(raw, field="after")
        )
        page = contacts.contact_list(owner=owner, window=window)
        return pages.page_response("contacts", page)


class ContactApi(APIView):
    @operation(
        "v1_contacts_put",
        raising=(
            *INPUT_CODES,
            "FIELD_TOO_LARGE",
            "FORBIDDEN",
            "INVALID_NAME",
            "INVISIBLE_CHARACTER",
            "RATE_LIMITED",
        ),
        request=s.ContactCardInput,
        responses=made(s.ContactCardOutput),
        summary="Save a portable contact card in the caller's address book",
        description="The card's `id` must be the path's contact id. 201 when the contact is "
        "new, 200 when it replaced a card (each change is a `contact.upsert` event of the "
        "address book; a card equal to the stored one adds none).",
    )
    def put(self, request: AgentRequest, agent_id: str, contact_id: str) -> Response:
        owner, card = owner_and_body(request, agent_id, s.ContactCardInput)
        stored, created = contact_put(owner=owner, contact_id=contact_id, card=card)
        return created_response(stored, created)

    @operation(
        "v1_contacts_show",
        raising=("FORBIDDEN", "CONTACT_NOT_FOUND"),
        responses=s.ContactCardOutput,
        summary="Show a card of the caller's address book",
    )
    def get(self, request: AgentRequest, agent_id: str, contact_id: str) -> Response:
        owner = owner_of(request, agent_id)
        return Response(contacts.contact_get(owner=owner, contact_id=contact_id))


class ContactShareApi(APIView):
    @operation(
        "v1_contact_shares_send",
        raising=(*SEND_CODES, "INVISIBLE_CHARACTER", "CONTACT_NOT_FOUND"),
        request=s.ContactShareInput,
        responses={201: s.EnvelopeOutput},
        summary="Share a card of the caller's address book with another agent",
        description="201 with the envelope delivered: kind `contact.share`, the whole card in "
        "`message.data.contact`.",
    )
    def post(self, request: AgentRequest, agent_id: str) -> Response:
        sender, data = owner_and_body(request, agent_id, s.ContactShareInput)
        return sent_response(
            contact_share_send(
                sender=sender,
                to=data["to"],
                contact_id=data["contact_id"],
                conversation_id=data.get("conversation_id"),
            )
        )


class ContactShareAcceptApi(APIView):
    @operation(
        "v1_contact_shares_accept",
        raising=("UNKNOWN_FIELD", "INVALID_VALUE", "FORBIDDEN", "MESSAGE_NOT_FOUND"),
        request=s.EmptyInput,
        responses=made(s.ContactEventOutput),
        summary="Accept a contact share the caller received",
        description="Appends a `contact.upsert` event of the shared card to the caller's "
        "address book (201); the received envelope never changes. Accepting it again answers "
        "the first acceptance (200). Only its recipient may accept it (else 404).",
    )
    def post(self, request: AgentRequest, agent_id: str, message_id: str) -> Response:
        owner, _ = owner_and_body(request, agent_id, s.EmptyInput)
        event, created = contact_share_accept(owner=owner, message_id=message_id)
        return created_response(contacts.contact_event_dict(event), created)


class AddressBookApi(APIView):
    heavy_methods = ("GET",)

    @operation(
        "v1_address_book_read",
        raising=("FORBIDDEN", "INVALID_CURSOR", "INVALID_VALUE"),
        parameters=(SEQ_CURSOR, LIMIT),
        responses=s.AddressBookOutput,
        summary="Replay the caller's address book: its contact.upsert events from a cursor",
    )
    def get(self, request: AgentRequest, agent_id: str) -> HttpResponse:
        owner = owner_of(request, agent_id)
        cursor = envelopes.inbox_cursor_parse(request.query_params.get("cursor"))
        page = contacts.address_book_page(owner=owner, cursor=cursor, limit=limit_of(request))
        return json_response(page.body())


class MonitorApi(APIView):
    authentication_classes = [AdminTokenAuthentication]
    heavy_methods = ("GET",)

    @operation(
        "v1_monitor_read",
        raising=(
            "MONITOR_DISABLED",
            "ADMIN_TOKEN_REQUIRED",
            "INVALID_CURSOR",
            "MONITOR_CURSOR_RETIRED",
            "INVALID_VALUE",
        ),
        parameters=(
            OpenApiParameter(
                "cursor",
                MONITOR_CURSOR,
                description="a `next_cursor` (or a delivery's `cursor`), unchanged; every inbox "
                "from 0 when omitted and no `Last-Event-ID` is sent (400 INVALID_CURSOR for "
                "anything else; a version-1 cursor: 400 MONITOR_CURSOR_RETIRED)",
            ),
            LIMIT,
            OpenApiParameter(
                "Last-Event-ID",
                MONITOR_CURSOR,
                location=OpenApiParameter.HEADER,
                description="the cursor, when the query names none (an SSE reconnect sends it)",
            ),
        ),
        responses=s.MonitorOutput,
        summary="The admin monitor: every agent's inbox fanned in, from an opaque cursor",
        description="Needs the server's AGENT_CHAT_ADMIN_TOKEN (404 MONITOR_DISABLED without "
        "one; any other token is 403 ADMIN_TOKEN_REQUIRED). Deliveries come in the order they "
        "committed (each inbox's in seq_num order); each carries the cursor after it.",
    )
    def get(self, request: Request) -> HttpResponse:
        raw, field = cursor_text(request)
        cursor = None if raw is None else envelopes.monitor_cursor_decode(raw, field=field)
        page = monitor.monitor_page(cursor=cursor, limit=limit_of(request))
        return json_response(page.body())
