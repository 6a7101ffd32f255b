"""The shape of an MCP tool (``Tool``) and the JSON-schema helpers its input schemas are
written with; the tools themselves are in ``mcp_tools`` (the REST operations), ``mcp_direct``
(HTTP v1 direct messages) and ``mcp_ep`` (EP-0118)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    schema: dict[str, Any]
    call: Callable[..., Any]  # (client, args) -> body; (client, args, cancelled) if cancellable
    read_only: bool = False
    moves_cursor: bool = False  # the channel's unread view changes when it succeeds
    # ``call`` takes a third argument, a threading.Event the MCP server sets when the call
    # is cancelled (the thread it runs in cannot be stopped otherwise).
    cancellable: bool = False


def object_schema(required: list[str], **props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": False,
    }


def string_schema(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def strings_schema(description: str) -> dict[str, Any]:
    return {"type": "array", "items": {"type": "string"}, "description": description}
