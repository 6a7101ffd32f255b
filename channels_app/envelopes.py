"""HTTP v1 records (the Agent Chat protocol v1 document): the envelope, a delivery, a contact
card, the cursors, and the rules of their fields. Pure functions: the API, the live streams and
whatever else shows an envelope spell it here, from the rows that hold it.

An envelope is stored as a ``Message`` of the direct channel of its pair (``services.direct``)
plus its ``Delivery`` (the recipient's inbox seq, the envelope id, its kind); it is rebuilt from
the two, so there is one copy of its text and data. Spellings: ``created_at`` and a delivery's
``timestamp`` are RFC 3339 in UTC with ``Z``, to the microsecond (``2026-07-19T12:00:00.123456Z``:
the monitor orders by the timestamp as stored, so a client sees the order it is told).

The document's S2 record headers (``agent-chat-kind``, ``agent-chat-id``, ...) have no HTTP
counterpart here: the same values are the envelope's fields (``kind``, ``id``, ``from``, ``to``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name, is_agent_name
from agentchat.core.rules.validation import (
    INVISIBLE,
    MAX_INT_DIGITS,
    json_value_check,
    text_check,
)
from channels_app.models import Delivery, Message

SCHEMA = "agent-chat/envelope.v1"
KINDS = tuple(Delivery.Kind.values)
RECEIPT_STATUSES = ("delivered", "processed", "read", "rejected")

# An envelope id (the caller's or ours): 1-128 of these, not only dots (``.`` and ``..`` could
# not be named in a URL path, as an acceptance names a share). The schema's spelling:
# ``agentchat.core.http.schema.ENVELOPE_ID_PATTERN``.
ENVELOPE_ID_RE = re.compile(r"[A-Za-z0-9._:-]{1,128}\Z")
ENVELOPE_ID_MAX = 128
# conversation_id and correlation_id: one line of visible text.
THREAD_ID_MAX = 128
CONTENT_TYPE_MAX = 200
# metadata and a card's labels: bounded maps of strings.
MAP_ENTRIES_MAX = 64
MAP_KEY_BYTES = 128
MAP_VALUE_BYTES = 4096
DETAIL_MAX = 4096
# A contact card's fields.
DISPLAY_NAME_MAX = 200
ENDPOINT_MAX = 2048
PUBLIC_KEY_MAX = 4096
CAPABILITIES_MAX = 64
CAPABILITY_MAX = 128
# An endpoint: an http or https URL with a host (the schema's ``ENDPOINT_PATTERN``).
ENDPOINT_RE = re.compile(r"https?://[^\x00-\x20\x7f-\x9f\u2028\u2029/]")
ENDPOINT_PATTERN = (
    r"^https?://[^\x00-\x20\x7f-\x9f\u2028\u2029/][^\x00-\x1f\x7f-\x9f\u2028\u2029]*$"
)
CARD_FIELDS = ("id", "display_name", "endpoint", "capabilities", "public_key", "labels")

# Inbox pages: ``limit`` 1-1000, 100 by default (the document's example).
INBOX_LIMIT_DEFAULT = 100
INBOX_LIMIT_MAX = 1000
# A monitor cursor's text: version 2 is some 30 characters whatever the number of inboxes;
# the limit is the one of version 1 (a vector of per-inbox positions, still taken to be
# refused with where to resume): some 500 inboxes, in a URL or a Last-Event-ID header.
MONITOR_CURSOR_MAX = 12 * 1024
MONITOR_CURSOR_VERSION = 2

TITLE_CHARS = 120
_NOT_IN_TITLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]|" + INVISIBLE.pattern)


# --- field rules --------------------------------------------------------------------------------


def envelope_id_new() -> str:
    """An id for an envelope the caller gave none: ``msg_`` and 32 hex digits (the document's)."""
    return f"msg_{uuid.uuid4().hex}"


def conversation_id_new() -> str:
    return f"conv_{uuid.uuid4().hex}"


def is_envelope_id(value: object) -> bool:
    return (
        isinstance(value, str)
        and ENVELOPE_ID_RE.fullmatch(value) is not None
        and value.strip(".") != ""
    )


def envelope_id_check(value: object, *, field: str = "id") -> str:
    """Raises INVALID_VALUE."""
    if not is_envelope_id(value):
        raise AppError(
            "INVALID_VALUE",
            f"{field} must be 1-{ENVELOPE_ID_MAX} of A-Z, a-z, 0-9, '.', '_', ':', '-', "
            "and not only dots",
            detail={"field": field},
        )
    return value  # type: ignore[return-value]


def thread_id_check(value: object, *, field: str) -> str | None:
    """conversation_id, correlation_id: null, or one line of 1-128 visible characters. Raises
    INVALID_VALUE, INVISIBLE_CHARACTER."""
    if value is None:
        return None
    return text_check(
        value, field=field, single_line=True, allow_empty=False, max_chars=THREAD_ID_MAX
    )


def content_type_check(value: object) -> str | None:
    if value is None:
        return None
    return text_check(
        value,
        field="content_type",
        single_line=True,
        allow_empty=False,
        max_chars=CONTENT_TYPE_MAX,
    )


def _utf8_len(value: str) -> int:
    return len(value.encode("utf-8", "surrogatepass"))


def string_map_check(value: object, *, field: str) -> dict[str, str]:
    """metadata, labels: null (as {}) or an object of at most 64 entries, each key one line of
    1-128 bytes and each value a string of at most 4 KiB (UTF-8). Raises INVALID_TYPE,
    INVALID_VALUE, INVISIBLE_CHARACTER."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise AppError("INVALID_TYPE", f"{field} must be an object", detail={"field": field})
    if len(value) > MAP_ENTRIES_MAX:
        raise AppError(
            "INVALID_VALUE",
            f"{field} holds at most {MAP_ENTRIES_MAX} entries",
            detail={"field": field, "max_entries": MAP_ENTRIES_MAX},
        )
    for key, item in value.items():
        if key == "":
            raise AppError(
                "INVALID_VALUE", f"{field}: a key is empty", detail={"field": field, "key": ""}
            )
        text_check(key, field=field, single_line=True)
        if _utf8_len(key) > MAP_KEY_BYTES:
            raise AppError(
                "INVALID_VALUE",
                f"{field}: a key is over {MAP_KEY_BYTES} bytes",
                detail={"field": field, "max_key_bytes": MAP_KEY_BYTES},
            )
        if not isinstance(item, str):
            raise AppError(
                "INVALID_TYPE", f"{field}.{key}: must be a string", detail={"field": field}
            )
        text_check(item, field=f"{field}.{key}")
        if _utf8_len(item) > MAP_VALUE_BYTES:
            raise AppError(
                "INVALID_VALUE",
                f"{field}.{key}: a value is over {MAP_VALUE_BYTES} bytes",
                detail={"field": field, "max_value_bytes": MAP_VALUE_BYTES},
            )
    return dict(value)


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=False)


def text_field_check(value: object) -> str | None:
    """``text``: null or a string of at most 512 KiB in UTF-8. Raises INVALID_VALUE,
    FIELD_TOO_LARGE."""
    if value is None:
        return None
    return text_check(value, field="text")


def data_field_check(value: Any) -> Any:
    """``data``: any JSON value, at most 512 KiB as compact JSON. Raises FIELD_TOO_LARGE,
    INVALID_VALUE, INVALID_TYPE, JSON_TOO_DEEP."""
    if value is None:
        return None
    json_value_check(value, field="data")
    limit = settings.AGENTCHAT_MAX_FIELD_BYTES
    if _utf8_len(compact_json(value)) > limit:
        raise AppError(
            "FIELD_TOO_LARGE",
            f"data is over {limit} bytes as compact JSON",
            detail={"field": "data", "limit": limit},
        )
    return value


def _card_line(card: dict[str, Any], field: str, max_chars: int) -> str | None:
    value = card.get(field)
    if value is None:
        return None
    return text_check(value, field=field, single_line=True, allow_empty=False, max_chars=max_chars)


def contact_card_check(card: object) -> dict[str, Any]:
    """A portable contact card, complete: ``id`` (an agent id), ``display_name``, ``endpoint``
    (an http or https URL), ``public_key`` (each null or one line), ``capabilities`` (at most
    64 one-line strings), ``labels`` (a map as metadata). Missing fields are null, [] or {}.
    Raises UNKNOWN_FIELD, MISSING_FIELD, INVALID_NAME, INVALID_TYPE, INVALID_VALUE,
    INVISIBLE_CHARACTER."""
    if not isinstance(card, dict):
        raise AppError("INVALID_TYPE", "a contact card must be an object", detail={"field": ""})
    unknown = sorted(set(card) - set(CARD_FIELDS))
    if unknown:
        raise AppError(
            "UNKNOWN_FIELD",
            f"unknown field(s): {', '.join(name[:40] for name in unknown)}",
            detail={"fields": [name[:40] for name in unknown]},
        )
    if card.get("id") is None:
        raise AppError("MISSING_FIELD", "id: a card names its contact", detail={"field": "id"})
    check_agent_name(card["id"], field="id")
    endpoint = _card_line(card, "endpoint", ENDPOINT_MAX)
    if endpoint is not None and not ENDPOINT_RE.match(endpoint):
        raise AppError(
            "INVALID_VALUE", "endpoint must be an http or https URL", detail={"field": "endpoint"}
        )
    capabilities = card.get("capabilities")
    if capabilities is None:
        capabilities = []
    if not isinstance(capabilities, list):
        raise AppError(
            "INVALID_TYPE", "capabilities must be a list", detail={"field": "capabilities"}
        )
    if len(capabilities) > CAPABILITIES_MAX:
        raise AppError(
            "INVALID_VALUE",
            f"capabilities holds at most {CAPABILITIES_MAX} entries",
            detail={"field": "capabilities"},
        )
    for item in capabilities:
        text_check(
            item,
            field="capabilities",
            single_line=True,
            allow_empty=False,
            max_chars=CAPABILITY_MAX,
        )
    return {
        "id": card["id"],
        "display_name": _card_line(card, "display_name", DISPLAY_NAME_MAX),
        "endpoint": endpoint,
        "capabilities": list(capabilities),
        "public_key": _card_line(card, "public_key", PUBLIC_KEY_MAX),
        "labels": string_map_check(card.get("labels"), field="labels"),
    }


def receipt_status_check(value: str) -> str:
    if value not in RECEIPT_STATUSES:
        raise AppError(
            "INVALID_VALUE",
            f"status must be one of {', '.join(RECEIPT_STATUSES)}",
            detail={"field": "status", "allowed": list(RECEIPT_STATUSES)},
        )
    return value


def detail_check(value: object) -> str | None:
    if value is None:
        return None
    return text_check(value, field="detail", max_chars=DETAIL_MAX)


def request_digest(fields: dict[str, Any]) -> str:
    """What makes two requests of one envelope id the same content: the digest of their
    fields as the service normalized them (an omitted value and its default alike)."""
    canonical = json.dumps(fields, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


# --- spellings -----------------------------------------------------------------------------------


def rfc3339(value: datetime) -> str:
    """``2026-07-19T12:00:00.123456Z``: UTC, to the microsecond."""
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def envelope_title(kind: str, *, text: str | None, data: Any, content_type: str | None) -> str:
    """The title of the envelope's message in its direct channel: a receipt's status, a
    share's contact id, else the text's first line that shows something (control and
    invisible characters dropped, cut at 120 characters), else the content type, else the
    kind."""
    if kind == Delivery.Kind.RECEIPT:
        return f"receipt: {data['status']}"
    if kind == Delivery.Kind.CONTACT_SHARE:
        return f"contact: {data['contact']['id']}"
    for line in (text or "").splitlines():
        shown = " ".join(_NOT_IN_TITLE.sub("", line).split())
        if shown:
            return shown if len(shown) <= TITLE_CHARS else shown[: TITLE_CHARS - 1] + "…"
    return content_type or kind


def envelope_to_dict(delivery: Delivery, message: Message) -> dict[str, Any]:
    """The stored and returned envelope, exactly as the document spells it."""
    return {
        "schema": SCHEMA,
        "id": delivery.envelope_id,
        "kind": delivery.kind,
        "from": message.sender,
        # The delivery's (the message's ``to`` is [] for an agent named ``all``: in a direct
        # channel a broadcast reaches the other of the pair all the same).
        "to": delivery.recipient.name,
        "conversation_id": message.conversation_id or None,
        "correlation_id": message.correlation_id or None,
        "created_at": rfc3339(message.ts),
        "message": {
            "text": message.body if delivery.has_text else None,
            "data": message.data,
            "content_type": message.content_type or None,
        },
        "metadata": message.metadata,
    }


def delivery_to_dict(delivery: Delivery, message: Message) -> dict[str, Any]:
    """A delivery as an inbox page (and an SSE event's ``data:``) spells it."""
    return {
        "seq_num": delivery.seq,
        "timestamp": rfc3339(delivery.delivered_at),
        "envelope": envelope_to_dict(delivery, message),
    }


def contact_event_to_dict(
    seq: int, *, card: dict[str, Any], source: str, share_from: str, share_id: str, at: datetime
) -> dict[str, Any]:
    """An address book's ``contact.upsert`` event."""
    origin: dict[str, Any] = {"kind": source}
    if source == "share":
        origin.update({"from": share_from, "message_id": share_id})
    return {
        "seq_num": seq,
        "type": "contact.upsert",
        "timestamp": rfc3339(at),
        "contact": card,
        "source": origin,
    }


# --- cursors -------------------------------------------------------------------------------------


def _cursor_error(message: str) -> AppError:
    return AppError("INVALID_CURSOR", message, detail={"field": "cursor"})


def inbox_cursor_parse(raw: str | None, *, field: str = "cursor") -> int | None:
    """An inbox cursor (``cursor=`` or ``Last-Event-ID``): ASCII digits, at most 18 of them;
    None when absent or empty. Raises INVALID_CURSOR."""
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit() and len(raw) <= MAX_INT_DIGITS):
        raise AppError(
            "INVALID_CURSOR",
            f"{field} must be an inbox sequence number (ASCII digits)",
            detail={"field": field},
        )
    return int(raw)


@dataclass(frozen=True)
class MonitorCursor:
    """A place in the monitor: every delivery whose monitor number (``Delivery.mseq``) is at
    most ``seq`` is behind it, every other one ahead (0: the start). ``legacy`` is set only
    for a cursor of version 1 (a vector of per-inbox positions, what servers before the
    monitor's sequence made): it is not read, only refused with where to resume."""

    seq: int
    legacy: dict[str, int] | None = None

    def encode(self) -> str:
        """``base64url({"v":2,"s":<seq>})`` without padding."""
        text = json.dumps(
            {"v": MONITOR_CURSOR_VERSION, "s": self.seq}, separators=(",", ":"), ensure_ascii=True
        )
        return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def _legacy_encode(positions: dict[str, int]) -> str:
    """A version-1 cursor as the servers before the monitor's sequence spelled it."""
    kept = {name: pos for name, pos in sorted(positions.items()) if pos > 0}
    text = json.dumps({"v": 1, "p": kept}, separators=(",", ":"), ensure_ascii=True)
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def _is_position(pos: object) -> bool:
    return not isinstance(pos, bool) and isinstance(pos, int) and 0 <= pos < 10**MAX_INT_DIGITS


def monitor_cursor_decode(raw: str, *, field: str = "cursor") -> MonitorCursor:
    """The cursor ``encode`` made, exactly as it made it (the document: "pass next_cursor back
    unchanged"), or a version-1 cursor exactly as the servers before made it (``legacy``:
    ``monitor_page`` refuses it, MONITOR_CURSOR_RETIRED, saying where to resume). Raises
    INVALID_CURSOR for anything else: not base64url, padding, not the versioned JSON, a
    number that is no integer from 0, and any other spelling of a valid cursor."""
    if len(raw) > MONITOR_CURSOR_MAX or not re.fullmatch(r"[A-Za-z0-9_-]*", raw):
        raise _cursor_error(f"{field} is not a monitor cursor (base64url)")
    try:
        text = base64.urlsafe_b64decode(raw.rstrip("=") + "=" * (-len(raw.rstrip("=")) % 4))
        value = json.loads(text.decode("ascii"))
    except (binascii.Error, ValueError, RecursionError):
        raise _cursor_error(f"{field} is not a monitor cursor") from None
    if not isinstance(value, dict) or "v" not in value:
        raise _cursor_error(f"{field} is not a monitor cursor")
    if value["v"] == 1 and not isinstance(value["v"], bool) and set(value) == {"v", "p"}:
        positions = value["p"]
        if not isinstance(positions, dict) or not all(
            is_agent_name(name) and _is_position(pos) for name, pos in positions.items()
        ):
            raise _cursor_error(f"{field} holds a position that is not an inbox's")
        if _legacy_encode(positions) != raw:
            raise _cursor_error(f"{field} is not a cursor a server made; pass it unchanged")
        return MonitorCursor(0, legacy=dict(positions))
    if value["v"] != MONITOR_CURSOR_VERSION or isinstance(value["v"], bool):
        raise _cursor_error(f"{field} is of a version this server does not read")
    if set(value) != {"v", "s"} or not _is_position(value["s"]):
        raise _cursor_error(f"{field} is not a monitor cursor")
    cursor = MonitorCursor(value["s"])
    if cursor.encode() != raw:
        raise _cursor_error(f"{field} is not a cursor this server made; pass next_cursor unchanged")
    return cursor
