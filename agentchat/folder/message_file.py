"""One message file of a folder the reference CLI wrote (REFERENCE-CLI §3.3), read and judged:
its frontmatter split and every value checked as the server's rules check it, its name's seq.
Pure reading, no database (``agentchat.folder.importer`` plans a whole folder with it).

The file's text is kept as it is spelled (the sync writes it back byte for byte), but nothing
in it is taken for provenance: a ``sender_kind: human`` key is kept only as the file's claim
(``ImportedMessage.claimed_sender_kind``), and what the message is stored as is decided by the
import (``channels_app.services.messages_import``: imported, an agent's, never an audit).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import is_record_id
from agentchat.core.rules.records import ts_parse
from agentchat.core.rules.validation import text_check, text_problem
from agentchat.folder import reading
from channels_app import events
from channels_app.models import Message
from channels_app.services import (
    MESSAGE_ID_MAX,
    RECIPIENTS_MAX,
    SIGNAL_TYPES,
    STATUS_MAX,
    TITLE_MAX,
    ImportedMessage,
    message_kind_of,
)

SENDER_MAX = 200
TS_MAX = 64
SEQ_DIGITS_MAX = 15
DIGITS = re.compile(r"[0-9]+", re.ASCII)
_SERVER_ID = re.compile(r"msg_[0-9a-f]{32}")
# The reference's frontmatter keys; ``seq`` and ``channel`` are written from the row.
_REFERENCE_KEYS = ("seq", "from", "to", "reply_to", "channel", "ts", "status", "title")
# Our keys beyond the reference's (agentchat.folder.render), mapped back to their fields.
_TEXT_KEYS = {"conversation_id": 128, "correlation_id": 128, "content_type": 200}  # max chars
_BROADCAST = ("", "all", "[]", "*")


def in_file(where: str, exc: AppError) -> AppError:
    """``exc`` with ``where`` (a path relative to the root) leading its message."""
    if exc.detail.get("file") == where:
        return exc
    return AppError(exc.code, f"{where}: {exc.message}", detail={**exc.detail, "file": where})


def _bad_frontmatter(where: str, why: str) -> AppError:
    return AppError("IMPORT_BAD_FRONTMATTER", f"{where}: {why}", detail={"file": where})


def _compact(value: Any) -> str:
    # As agentchat.folder.render writes data and metadata.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


# --- messages ------------------------------------------------------------------------------


def frontmatter_split(text: str, where: str) -> tuple[list[tuple[str, str]], str]:
    """The frontmatter's (key, value) pairs, stripped as the reference strips them, and the
    body (everything after the closing ``---`` line). Stricter than the reference's reader,
    which reads a file without frontmatter as a message from nobody and skips lines without a
    colon: here both refuse the import, so that nothing in a file is silently dropped.
    Raises IMPORT_BAD_FRONTMATTER."""
    newline = text.find("\n")
    if newline < 0 or text[:newline].rstrip("\r") != "---":
        raise _bad_frontmatter(where, "the file does not start with a '---' frontmatter line")
    pairs: list[tuple[str, str]] = []
    position, number = newline + 1, 1
    while True:
        end = text.find("\n", position)
        line = text[position:] if end < 0 else text[position:end]
        number += 1
        if line.strip() == "---":
            return pairs, "" if end < 0 else text[end + 1 :]
        if end < 0:
            raise _bad_frontmatter(where, "the frontmatter is not closed by a '---' line")
        key, colon, value = line.partition(":")
        if not colon or not key.strip():
            raise _bad_frontmatter(where, f"frontmatter line {number} is not 'key: value'")
        pairs.append((key.strip(), value.strip()))
        position = end + 1


def _recipients(raw: str, where: str) -> list[str]:
    if raw in _BROADCAST:
        return []
    names = [name.strip() for name in raw.strip("[]").split(",")]
    names = [name for name in names if name]
    if len(names) > RECIPIENTS_MAX:
        raise _bad_frontmatter(where, f"to names more than {RECIPIENTS_MAX} recipients")
    if any(len(name) > SENDER_MAX for name in names):
        raise _bad_frontmatter(where, f"a recipient is over {SENDER_MAX} characters")
    return names


@dataclass
class ParsedMessage:
    message: ImportedMessage
    event: dict[str, Any] | None


def message_parse(raw: bytes, *, seq: int, where: str) -> ParsedMessage:
    """One message file. Raises IMPORT_UNREADABLE (not UTF-8), IMPORT_BAD_FRONTMATTER,
    INVALID_VALUE / FIELD_TOO_LARGE / INVISIBLE_CHARACTER (a value the server's rules refuse:
    ``from``, ``status`` and ``title`` are one-line fields), the EVENT_* codes for
    a message labelled ``event.*`` whose body is no valid event (EVENT_MALFORMED_BODY when it
    is no JSON); every message naming the file."""
    pairs, body = frontmatter_split(reading.text_decode(raw, where), where)
    known: dict[str, str] = {}
    mapped: dict[str, Any] = {}
    extra: list[list[str]] = []
    for key, value in pairs:
        problem = text_problem(key, single_line=True) or text_problem(value, single_line=True)
        if problem is not None:
            raise _bad_frontmatter(where, f"frontmatter key {key[:50]!r}: {problem}")
        if key in _REFERENCE_KEYS:
            if key in known:
                raise _bad_frontmatter(where, f"frontmatter key {key!r} is given twice")
            known[key] = value
        elif key in mapped or not _map_ours(key, value, mapped):
            extra.append([key, value])
    message_ts = ts_parse(known.get("ts", "")) if len(known.get("ts", "")) <= TS_MAX else None
    if message_ts is None:
        raise _bad_frontmatter(where, "ts must be an ISO-8601 time with an explicit UTC offset")
    reply_to = known.get("reply_to")
    if reply_to is not None and not (
        DIGITS.fullmatch(reply_to) and len(reply_to) <= SEQ_DIGITS_MAX
    ):
        raise _bad_frontmatter(where, "reply_to must be a message number")
    status = known.get("status", "")
    try:
        # One-line fields, so no invisible character either (as the API and a channel's topic):
        # the frontmatter split already refused line breaks and controls.
        sender = text_check(known.get("from", ""), field="from", max_chars=SENDER_MAX, visible=True)
        text_check(status, field="status", max_chars=STATUS_MAX, visible=True)
        title = text_check(known.get("title", ""), field="title", max_chars=TITLE_MAX, visible=True)
        body = text_check(body.rstrip(), field="body")
    except AppError as exc:
        raise in_file(where, exc) from None
    event = None
    if message_kind_of(status) == Message.Kind.EVENT:
        try:
            event = events.event_parse(body, where=where)
            events.event_visible_check(event)
        except AppError as exc:
            raise in_file(where, exc) from None
    message = ImportedMessage(
        source=where,
        seq=seq,
        message_id=mapped.get("id"),
        sender=sender,
        to=_recipients(known.get("to", ""), where),
        reply_to=None if reply_to is None else int(reply_to),
        ts=message_ts,
        ts_text=known["ts"],
        status=status,
        title=title,
        body=body,
        conversation_id=mapped.get("conversation_id", ""),
        correlation_id=mapped.get("correlation_id", ""),
        content_type=mapped.get("content_type", ""),
        data=mapped.get("data"),
        metadata=mapped.get("metadata", {}),
        frontmatter=extra,
        claimed_sender_kind=mapped.get("sender_kind", ""),
        signal_type=mapped.get("type", ""),
    )
    return ParsedMessage(message, event)


def _map_ours(key: str, value: str, mapped: dict[str, Any]) -> bool:
    """Map one of the keys our renderer writes back to its field when it is exactly as the
    renderer writes it (so a synced folder round-trips); False keeps it as an extra key."""
    if key == "id":
        if is_record_id(value, max_length=MESSAGE_ID_MAX) and not _SERVER_ID.fullmatch(value):
            mapped[key] = value
            return True
        return False
    if key == "type":
        # A signal's type; any other ``type`` (``decision``…) is the file's own key.
        if value in SIGNAL_TYPES:
            mapped[key] = value
            return True
        return False
    if key == "sender_kind":
        if value == "human":
            mapped[key] = value
            return True
        return False
    if key in _TEXT_KEYS:
        if value and len(value) <= _TEXT_KEYS[key]:
            mapped[key] = value
            return True
        return False
    if key in ("data", "metadata"):
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return False
        if _compact(parsed) != value:
            return False
        if key == "metadata" and not (
            isinstance(parsed, dict) and parsed and all(isinstance(v, str) for v in parsed.values())
        ):
            return False
        if key == "data" and parsed is None:
            return False
        mapped[key] = parsed
        return True
    return False


def message_seq(name: str) -> int | None:
    """The seq of a message file name (the reference's test: ends in ``.md``, and the part
    before the first ``-`` is decimal digits), None for any other name."""
    prefix, dash, _ = name.partition("-")
    if not dash or not name.endswith(".md") or not prefix.isdecimal():
        return None
    if not DIGITS.fullmatch(prefix):
        return -1  # decimal, but not ASCII digits: refused by the caller
    return int(prefix) if len(prefix) <= SEQ_DIGITS_MAX else -1
