"""The folder's files as the reference CLI writes them (REFERENCE-CLI §3): pure functions from a
record to its path inside the channel folder and its bytes. The sync writes these; the state
summary reads messages through ``message_text`` so that it sees exactly what the reference sees
in a synced folder (its crude body extraction included).

Messages (§3.3): ``<seq:04d>-<slug(from)>-<slug(title)>.md``; frontmatter lines ``key: value``
in the reference's order ``seq, from, to, [reply_to], channel, ts, status, title`` with every
run of CR/LF in a value collapsed to one space and nothing else escaped; ``to`` is the
recipients joined with ``,`` or ``all`` for a broadcast; an empty status is ``discussion``; the
body follows the closing ``---`` at once, its trailing whitespace stripped, one ``\\n`` after it.

What the reference's frontmatter cannot hold is carried as extra keys after its own (its
readers ignore keys they do not know): ``id`` (unless the server made it: ``msg_`` and 32 hex
digits), ``sender_kind`` (only ``human``: a person sent it; for an imported message, what its
file claimed, ``Message.claimed_sender_kind``, so the round trip holds), ``conversation_id``,
``correlation_id``, ``content_type``, ``data`` and ``metadata``
(compact JSON) when set, ``type`` for an EP-0118 signal (its type: ``type: query``; the
reference reads ``type`` only to classify decisions, blockers and evidence, which no signal
type names), then the keys an imported file carried (``Message.frontmatter``), verbatim and
in their order.

A direct channel's message (an HTTP v1 envelope, ``Channel.direct_pair``) carries its envelope's
own fields last: ``envelope_id``, ``envelope_kind``, ``inbox_seq_num`` and ``delivered_at`` (the
recipient's inbox position and its timestamp) and ``envelope_text: null`` when the envelope had
no text (its body is then empty), from its ``Delivery``, which the sync loads with the message
(``message_iter_after(..., envelopes=True)``): a row loaded without it renders none, and never
costs a query. An import keeps these keys as a file's extra keys (an imported message is never an
envelope), so an import and a sync give the same bytes.

Records (§3.7-3.9): ``tasks/<id>.json``, ``claims/<task>.<owner>.json`` and
``locks/<lock_id>.json`` are the very records the API returns (``tasks_app.records``,
``locks_app.records``), ``state.md`` a stored summary's markdown, and a claimed legacy marker
(§3.6) ``task-<id>.CLAIMED-<slug(owner)>.md`` with the marker file's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from django.core.exceptions import ObjectDoesNotExist

from channels_app.envelopes import rfc3339
from channels_app.models import Channel, Delivery, MarkerClaim, Message
from channels_app.records import channel_created, message_ts
from locks_app.models import PathLock
from locks_app.records import lock_file_bytes, lock_file_name, lock_to_dict
from tasks_app.models import Lease, Task
from tasks_app.records import lease_path, lease_record, record_text, task_path, task_record

_SLUG_RUN = re.compile(r"[^a-z0-9]+")
_LINE_BREAKS = re.compile(r"[\r\n]+")
_SERVER_ID = re.compile(r"msg_[0-9a-f]{32}")
SLUG_MAX = 40

META_FILE = "_meta.json"
CURSORS_DIR = ".cursors"
# Created empty, as the reference's readers do, and never rewritten (REFERENCE-CLI §3.10).
LOCK_FILES = ("_tasks.lock", ".path-locks.lock")
STATE_FILE = "state.md"
# The reference's message file: digits, a dash, anything, ``.md`` (REFERENCE-CLI §3.3).
MESSAGE_NAME = re.compile(r"(\d+)-.*\.md", re.ASCII | re.DOTALL)


def slug(text: str) -> str:
    """The reference's slug: lowercase; each run outside ``[a-z0-9]`` becomes one ``-``; no
    ``-`` at either end; at most 40 characters (then no trailing ``-``); ``msg`` when empty."""
    cut = _SLUG_RUN.sub("-", text.lower()).strip("-")[:SLUG_MAX].rstrip("-")
    return cut or "msg"


def one_line(value: str) -> str:
    """A frontmatter value: every run of CR/LF becomes one space (the reference's only
    sanitizing, which keeps a value from forging a key)."""
    return _LINE_BREAKS.sub(" ", value)


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def message_name(message: Message) -> str:
    return f"{message.seq:04d}-{slug(message.sender)}-{slug(message.title)}.md"


def message_frontmatter(message: Message, *, channel: str) -> list[tuple[str, str]]:
    """The message's frontmatter as (key, value) pairs, in the order written."""
    pairs = [
        ("seq", str(message.seq)),
        ("from", message.sender),
        ("to", ",".join(message.to) if message.to else "all"),
    ]
    if message.reply_to is not None:
        pairs.append(("reply_to", str(message.reply_to)))
    pairs += [
        ("channel", channel),
        ("ts", message_ts(message)),
        ("status", message.status or "discussion"),
        ("title", message.title),
    ]
    if not _SERVER_ID.fullmatch(message.id):
        pairs.append(("id", message.id))
    # An imported message is an agent's here; its file's claim is written back where the file
    # had it, so that an import and a sync give the file's bytes again.
    kind = message.claimed_sender_kind if message.imported else message.sender_kind
    if kind and kind != "agent":
        pairs.append(("sender_kind", kind))
    for key in ("conversation_id", "correlation_id", "content_type"):
        if value := getattr(message, key):
            pairs.append((key, value))
    if message.data is not None:
        pairs.append(("data", _compact(message.data)))
    if message.metadata:
        pairs.append(("metadata", _compact(message.metadata)))
    if message.signal_type:
        pairs.append(("type", message.signal_type))
    pairs += envelope_frontmatter(message)
    pairs += [(str(key), str(value)) for key, value in message.frontmatter]
    return pairs


def _loaded_delivery(message: Message) -> Delivery | None:
    """The message's ``Delivery`` when it was loaded with it (``select_related``), else None:
    never a query per message."""
    if not Message.delivery.is_cached(message):
        return None
    try:
        return message.delivery
    except ObjectDoesNotExist:
        return None


def envelope_frontmatter(message: Message) -> list[tuple[str, str]]:
    """An envelope's own keys (see the module), [] for any other message."""
    delivery = _loaded_delivery(message)
    if delivery is None:
        return []
    pairs = [
        ("envelope_id", delivery.envelope_id),
        ("envelope_kind", delivery.kind),
        ("inbox_seq_num", str(delivery.seq)),
        ("delivered_at", rfc3339(delivery.delivered_at)),
    ]
    if not delivery.has_text:
        pairs.append(("envelope_text", "null"))
    return pairs


def message_text(message: Message, *, channel: str) -> str:
    pairs = message_frontmatter(message, channel=channel)
    lines = [f"{key}: {one_line(value)}" for key, value in pairs]
    return "---\n" + "\n".join(lines) + "\n---\n" + message.body.rstrip() + "\n"


def message_bytes(message: Message, *, channel: str) -> bytes:
    return message_text(message, channel=channel).encode("utf-8")


def meta_record(channel: Channel) -> dict[str, Any]:
    """``_meta.json``'s keys in the reference's order; ``visibility`` only for a members-only
    channel (the reference ignores it; an import restores it)."""
    record: dict[str, Any] = {
        "channel": channel.name,
        "members": list(channel.members),
        "topic": channel.topic,
        "created": channel_created(channel),
    }
    if channel.visibility != Channel.Visibility.OPEN:
        record["visibility"] = channel.visibility
    return record


def meta_bytes(channel: Channel) -> bytes:
    """As the reference writes it: indent 2, ASCII escapes, no final newline."""
    return json.dumps(meta_record(channel), indent=2).encode("ascii")


def cursor_name(agent: str) -> str:
    return f"{CURSORS_DIR}/{slug(agent)}.txt"


def cursor_bytes(seq: int) -> bytes:
    """A bare decimal, no newline."""
    return str(seq).encode("ascii")


def cursor_files(cursors: Iterable[tuple[str, int]]) -> dict[str, bytes]:
    """``.cursors/<slug>.txt`` for (agent, seq) pairs: agents sharing a slug share a file,
    which holds the higher seq."""
    highest: dict[str, int] = {}
    for agent, seq in cursors:
        name = cursor_name(agent)
        highest[name] = max(seq, highest.get(name, seq))
    return {name: cursor_bytes(seq) for name, seq in sorted(highest.items())}


# The reference's modes: messages, ``_meta.json`` and cursors with the default umask, JSON
# records and ``state.md`` from mkstemp (REFERENCE-CLI §3.1).
PLAIN_MODE = 0o644
RECORD_MODE = 0o600
TASKS_DIR = "tasks"
CLAIMS_DIR = "claims"
LOCKS_DIR = "locks"


def task_file(
    task: Task, *, channel: str, depends_on: Sequence[str], lease: Lease | None
) -> tuple[str, bytes]:
    """``tasks/<id>.json``: the API's task record (``tasks_app.records``), as the reference
    writes it."""
    record = task_record(task, channel=channel, depends_on=depends_on, lease=lease)
    return task_path(record), record_text(record).encode("utf-8")


def lease_file(lease: Lease, *, task_id: str, channel: str) -> tuple[str, bytes]:
    """``claims/<task>.<owner>.json`` of an active lease (an expired one too: it stays until
    recovered)."""
    record = lease_record(lease, task_id=task_id, channel=channel)
    return lease_path(record), record_text(record).encode("utf-8")


def lock_file(lock: PathLock) -> tuple[str, bytes]:
    """``locks/<lock_id>.json`` of a lock loaded with its channel and entries."""
    record = lock_to_dict(lock)
    return lock_file_name(record), lock_file_bytes(record)


# A legacy marker the reference can claim (§3.6), and its name once claimed (groups: the id,
# the owner's slug).
MARKER_NAME = re.compile(r"task-([A-Za-z0-9][A-Za-z0-9_-]*)\.md", re.ASCII)
MARKER_CLAIMED_NAME = re.compile(r"task-([A-Za-z0-9][A-Za-z0-9_-]*)\.CLAIMED-(.*)\.md", re.DOTALL)


def marker_file(claim: MarkerClaim) -> tuple[str, bytes] | None:
    """``task-<id>.CLAIMED-<slug(owner)>.md`` of a claimed marker, holding the marker file's
    text (empty for a claim made here); None for a marker the reference could not have
    claimed (one not named ``task-<id>.md``)."""
    match = MARKER_NAME.fullmatch(claim.marker)
    if match is None:
        return None
    return f"task-{match[1]}.CLAIMED-{slug(claim.owner)}.md", claim.text.encode("utf-8")


def state_bytes(markdown: str) -> bytes:
    """``state.md``: a stored summary's markdown (the compaction rendered it as the reference
    does), as UTF-8."""
    return markdown.encode("utf-8")
