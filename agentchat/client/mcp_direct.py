"""The MCP tools of HTTP v1 direct messages (/v1/, docs/http-v1.md): ``send_direct``,
``read_inbox``, ``send_receipt``."""

from __future__ import annotations

from typing import Any

from agentchat.client.api import Client
from agentchat.client.mcp_schema import Tool
from agentchat.client.mcp_schema import object_schema as _obj
from agentchat.client.mcp_schema import string_schema as _str

RECEIPT_STATUSES = ["delivered", "processed", "read", "rejected"]
INBOX_LIMIT_MAX = 1000
ENVELOPE_ID = _str("an envelope id: 1-128 of A-Z a-z 0-9 . _ : -", minLength=1, maxLength=128)
CONVERSATION = _str("a conversation id, one line", minLength=1, maxLength=128)


def send_direct(client: Client, args: dict[str, Any]) -> Any:
    metadata = args.get("metadata")
    return client.v1_send(
        args["to"],
        args.get("text"),
        envelope_id=args.get("id"),
        conversation_id=args.get("conversation_id"),
        correlation_id=args.get("correlation_id"),
        data=args.get("data"),
        content_type=args.get("content_type"),
        metadata=metadata if isinstance(metadata, dict) else None,
    )


def read_inbox(client: Client, args: dict[str, Any]) -> Any:
    return client.v1_inbox(cursor=args.get("cursor"), limit=args.get("limit"))


def send_receipt(client: Client, args: dict[str, Any]) -> Any:
    return client.v1_receipt(
        args["message_id"],
        args["status"],
        to=args.get("to"),
        detail=args.get("detail"),
        conversation_id=args.get("conversation_id"),
        envelope_id=args.get("id"),
    )


DIRECT_TOOLS: list[Tool] = [
    Tool(
        "send_direct",
        "Send a direct message (an HTTP v1 envelope) to one agent's inbox. Returns the stored "
        "envelope; pass your own `id` to make a retry return it instead of sending twice.",
        _obj(
            ["to"],
            to=_str("the recipient agent", minLength=1, maxLength=64),
            text=_str("the message's text"),
            data={"description": "any JSON value carried beside the text"},
            content_type=_str("the data's content type, one line", maxLength=200),
            conversation_id=CONVERSATION,
            correlation_id=CONVERSATION,
            metadata={
                "type": "object",
                "additionalProperties": {"type": "string"},
                "maxProperties": 64,
                "description": "a map of strings",
            },
            id=ENVELOPE_ID,
        ),
        send_direct,
    ),
    Tool(
        "read_inbox",
        "Read your inbox from `cursor` (the seq_num of the next delivery to read; default 0): "
        "`deliveries`, `next_cursor` (pass it to the next call) and `tail` (next_cursor below "
        "tail: there are more). Moves nothing: the cursor is yours to keep.",
        _obj(
            [],
            cursor={"type": "integer", "minimum": 0, "description": "default 0"},
            limit={
                "type": "integer",
                "minimum": 1,
                "maximum": INBOX_LIMIT_MAX,
                "description": "default 100",
            },
        ),
        read_inbox,
        read_only=True,
    ),
    Tool(
        "send_receipt",
        "Answer a message you received with a receipt (delivered, processed, read, rejected): "
        "a new envelope of kind receipt in its sender's inbox; the original never changes.",
        _obj(
            ["message_id", "status"],
            message_id=ENVELOPE_ID,
            status={"type": "string", "enum": RECEIPT_STATUSES},
            detail=_str("one line", maxLength=4096),
            to=_str("the original's sender (needed only when two senders used the id)"),
            conversation_id=CONVERSATION,
            id=ENVELOPE_ID,
        ),
        send_receipt,
    ),
]
