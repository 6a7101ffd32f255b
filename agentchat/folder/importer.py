"""Reading a folder the reference CLI wrote (REFERENCE-CLI §3), checking every record of it:
pure reading, no database. ``folder_plan`` is the first pass: it reads and judges everything
and keeps what the write needs, except the messages, of which it keeps only the file names
(a channel is not held in memory); ``messages_stream`` is the second pass, inside the write
transaction (``agentchat.folder.load``), which reads each message file again, refusing one
that changed in between. One message file is read by ``agentchat.folder.message_file``.

What counts, per channel folder (a directory of the root holding ``_meta.json``):
``_meta.json``; message files ``<digits>-<anything>.md`` (the seq is the file name's, the
frontmatter's ``seq`` and ``channel`` are never read); ``.cursors/<slug>.txt``;
``tasks/*.json``, ``claims/*.json``, ``locks/*.json`` (names starting with ``.`` or ``_``
skipped, as the reference skips them; a pending transaction marker refuses the import); the
legacy markers ``task-<id>.CLAIMED-<agent>.md``. Everything else is ignored: ``state.md``
(derived), ``_tasks.lock``, ``.path-locks.lock``, ``_seq.lock``, temporary files, unclaimed
markers, other files. Symbolic links are never followed: one where a record is read refuses
the import.

Every refusal is an ``AppError`` whose message starts with the file it is about, relative to
the root (``backend/tasks/T-1.json: …``), with that path in ``detail["file"]``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_channel_name, is_agent_name
from agentchat.core.rules.records import ts_parse
from agentchat.folder import reading
from agentchat.folder.fences import CODE as FENCES_CODE
from agentchat.folder.fences import FENCES_FILE, Fences, fences_parse
from agentchat.folder.message_file import (  # noqa: F401 (the import's public names)
    DIGITS,
    SENDER_MAX,
    SEQ_DIGITS_MAX,
    TS_MAX,
    ParsedMessage,
    frontmatter_split,
    in_file,
    message_parse,
    message_seq,
)
from agentchat.folder.reading import Dir, StatKey
from agentchat.folder.render import CURSORS_DIR, MARKER_CLAIMED_NAME, META_FILE, slug
from channels_app.models import Channel
from channels_app.services import (
    ImportedMessage,
    ImportedPresence,
    members_normalize,
    topic_check,
    visibility_check,
)
from locks_app.imports import LockImport, lock_record_parse, locks_overlap_check
from tasks_app.services.imports import (
    LeaseImport,
    TaskImport,
    lease_record_parse,
    task_record_parse,
    tasks_consistency_check,
)

# Bounds on what one import reads: a hostile folder cannot make it read without end.
T = TypeVar("T")

MAX_CHANNELS = 10_000
MAX_ENTRIES = 250_000  # entries of one directory (a channel's messages among them)
MAX_RECORDS = 10_000  # tasks, claims, locks, cursors of one channel, each
MESSAGE_MAX_BYTES = 1 << 20
RECORD_MAX_BYTES = 1 << 20  # _meta.json, a task, claim or lock record
CURSOR_MAX_BYTES = 64
MARKER_MAX_BYTES = 64 * 1024  # a legacy marker's text (a note for whoever claims it)
# Messages parsed by the first pass are kept for the second up to this budget (for the whole
# import), so that the write transaction, which a running server's writers wait for on SQLite,
# mostly only checks that each file is unchanged; beyond it they are read again. A kept message
# costs its file's bytes plus CACHE_OVERHEAD (its Python objects: measured about 1.5 KiB for a
# small one).
CACHE_BYTES = 48 << 20
CACHE_OVERHEAD = 1536

LEASE_MARKER = ".lease-transaction.json"
LOCK_MARKER = ".path-lock-transaction.json"


def _bad_name(where: str, why: str) -> AppError:
    return AppError("IMPORT_INVALID_FILE_NAME", f"{where}: {why}", detail={"file": where})


# --- records -------------------------------------------------------------------------------


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key!r}")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def json_record(raw: bytes, where: str, code: str) -> Any:
    """A JSON file (no duplicate keys, no NaN). Raises ``code`` naming the file."""
    text = reading.text_decode(raw, where)
    try:
        return json.loads(text, object_pairs_hook=_no_duplicates, parse_constant=_no_constants)
    except (ValueError, RecursionError) as exc:
        raise AppError(
            code, f"{where}: not a valid JSON record ({str(exc)[:200]})", detail={"file": where}
        ) from None


@dataclass
class Meta:
    topic: str
    members: list[str]
    visibility: str
    created_at: datetime | None
    created_text: str | None


def meta_parse(data: Any, *, channel: str, where: str) -> Meta:
    """``_meta.json``: an object; ``channel`` (when present) the folder's name; ``members`` a
    list of agent names; ``topic`` text; ``created`` an ISO-8601 time with offset;
    ``visibility`` (ours) open or members. Other keys are ignored, as the reference ignores
    them. Raises IMPORT_INVALID_META, INVALID_NAME, INVALID_VALUE, FIELD_TOO_LARGE."""

    def invalid(why: str) -> AppError:
        return AppError("IMPORT_INVALID_META", f"{where}: {why}", detail={"file": where})

    if not isinstance(data, dict):
        raise invalid("not a JSON object")
    if "channel" in data and data["channel"] != channel:
        raise invalid(f"channel {str(data['channel'])[:100]!r} is not the folder's name")
    members = data.get("members", [])
    if not isinstance(members, list):
        raise invalid("members must be a list")
    created = data.get("created")
    created_at = None
    if created is not None:
        created_at = (
            ts_parse(created) if isinstance(created, str) and len(created) <= TS_MAX else None
        )
        if created_at is None:
            raise invalid("created must be an ISO-8601 time with an explicit UTC offset")
    try:
        return Meta(
            topic=topic_check(data.get("topic", ""), imported=True),
            members=members_normalize(members),
            visibility=visibility_check(data.get("visibility", Channel.Visibility.OPEN)),
            created_at=created_at,
            created_text=created,
        )
    except AppError as exc:
        raise in_file(where, exc) from None


# --- the plan ------------------------------------------------------------------------------


@dataclass
class ChannelPlan:
    """One channel folder, judged: everything the write needs but the messages' content."""

    name: str
    meta: Meta
    messages: list[tuple[int, str, StatKey]] = field(default_factory=list)  # seq order
    presence: dict[str, ImportedPresence] = field(default_factory=dict)
    cursors: list[tuple[str, int]] = field(default_factory=list)
    # (file, marker, owner, the file's text)
    markers: list[tuple[str, str, str, str]] = field(default_factory=list)
    tasks: list[TaskImport] = field(default_factory=list)
    leases: list[LeaseImport] = field(default_factory=list)
    locks: list[LockImport] = field(default_factory=list)
    fences: Fences = field(default_factory=Fences)
    message_ids: set[str] = field(default_factory=set)
    cache: dict[int, ImportedMessage] = field(default_factory=dict)

    @property
    def last_seq(self) -> int:
        return self.messages[-1][0] if self.messages else 0


def _records(
    channel_dir: Dir, sub: str, *, marker: str | None, pending_code: str
) -> Iterator[tuple[Dir, str]]:
    """The record files of ``tasks``/``claims``/``locks`` (the reference reads ``*.json`` not
    starting with ``.`` or ``_``). Raises ``pending_code`` for a transaction marker,
    IMPORT_PATH_OUTSIDE_ROOT, IMPORT_UNREADABLE, IMPORT_LIMIT_EXCEEDED."""
    with reading.dir_open(channel_dir, sub) as directory:
        if directory is None:
            return
        listing = reading.entries(directory, limit=MAX_ENTRIES)
        names = {entry.name for entry in listing}
        if marker is not None and marker in names:
            where = directory.child(marker)
            raise AppError(
                pending_code,
                f"{where}: a transaction of the reference is pending; run its "
                "recover-pending first",
                detail={"file": where},
            )
        chosen = [
            entry
            for entry in listing
            if entry.name.endswith(".json") and not entry.name.startswith((".", "_"))
        ]
        if len(chosen) > MAX_RECORDS:
            raise AppError(
                "IMPORT_LIMIT_EXCEEDED",
                f"{directory.path}: more than {MAX_RECORDS} records",
                detail={"file": directory.path, "limit": MAX_RECORDS},
            )
        for entry in chosen:
            yield directory, entry.name


def _message_index(channel_dir: Dir, listing: list[reading.Entry]) -> list[tuple[int, str]]:
    index: list[tuple[int, str]] = []
    seen: dict[int, str] = {}
    for entry in listing:
        seq = message_seq(entry.name)
        if seq is None:
            continue
        where = channel_dir.child(entry.name)
        if seq < 1:
            raise _bad_name(where, "a message number must be 1 to 10^15 in ASCII digits")
        if seq in seen:
            raise AppError(
                "IMPORT_DUPLICATE_SEQ",
                f"{where}: seq {seq} is also {channel_dir.child(seen[seq])}",
                detail={"file": where, "seq": seq, "other": channel_dir.child(seen[seq])},
            )
        seen[seq] = entry.name
        index.append((seq, entry.name))
    index.sort()
    return index


def _presence_note(plan: ChannelPlan, parsed: ParsedMessage) -> None:
    """What ``message_post`` and ``event_post`` would have written for this message."""
    message = parsed.message
    if not message.sender:
        return
    row = plan.presence.get(message.sender) or ImportedPresence(
        agent=message.sender, last_seq=message.seq, last_sent_at=message.ts
    )
    row = row._replace(last_seq=message.seq, last_sent_at=message.ts)
    event = parsed.event
    if event is not None:
        row = row._replace(harness=event["harness"])
        if event["event"] == "status":
            row = row._replace(
                status=event["status"],
                detail=event.get("detail"),
                status_ts=event["ts"],
                status_seq=message.seq,
            )
        else:
            row = row._replace(primitives=event["primitives"], capability_seq=message.seq)
    plan.presence[message.sender] = row


def _agent_for_slug(plan: ChannelPlan, senders: dict[str, str], name: str) -> str:
    """A cursor's or marker's agent from the slug the reference keyed it by: a member with
    that slug, else a sender with it, else the slug itself."""
    for member in plan.meta.members:
        if slug(member) == name:
            return member
    return senders.get(name, name)


def _is_slug(text: str) -> bool:
    return bool(text) and slug(text) == text and is_agent_name(text)


def channel_plan(root: Dir, name: str, cache_budget: list[int] | None = None) -> ChannelPlan:
    """Read and judge one channel folder (the first pass), keeping parsed messages while
    ``cache_budget[0]`` (bytes, spent here) lasts. Raises the codes of this module."""
    budget = cache_budget if cache_budget is not None else [0]
    try:
        check_channel_name(name)
    except AppError as exc:
        raise in_file(name, exc) from None
    with reading.dir_open(root, name) as channel_dir:
        if channel_dir is None:
            raise AppError(
                "IMPORT_FOLDER_CHANGED",
                f"{name}: the channel folder is gone",
                detail={"file": name},
            )
        listing = reading.entries(channel_dir, limit=MAX_ENTRIES)
        raw, _ = reading.file_read(channel_dir, META_FILE, limit=RECORD_MAX_BYTES)
        where = channel_dir.child(META_FILE)
        meta = meta_parse(json_record(raw, where, "IMPORT_INVALID_META"), channel=name, where=where)
        plan = ChannelPlan(name=name, meta=meta)
        senders: dict[str, str] = {}  # slug -> the first sender (by seq) that is an agent name
        for seq, file_name in _message_index(channel_dir, listing):
            raw, key = reading.file_read(channel_dir, file_name, limit=MESSAGE_MAX_BYTES)
            parsed = message_parse(raw, seq=seq, where=channel_dir.child(file_name))
            plan.messages.append((seq, file_name, key))
            cost = len(raw) + CACHE_OVERHEAD
            if budget[0] >= cost:
                budget[0] -= cost
                plan.cache[seq] = parsed.message
            if parsed.message.message_id is not None:
                if parsed.message.message_id in plan.message_ids:
                    raise AppError(
                        "ID_CONFLICT",
                        f"{parsed.message.source}: message id {parsed.message.message_id!r} "
                        "is used twice",
                        detail={"file": parsed.message.source},
                    )
                plan.message_ids.add(parsed.message.message_id)
            _presence_note(plan, parsed)
            sender = parsed.message.sender
            if is_agent_name(sender):
                senders.setdefault(slug(sender), sender)
        _cursors_read(plan, channel_dir, senders)
        _markers_read(plan, channel_dir, listing, senders)
        _tasks_read(plan, channel_dir)
        _locks_read(plan, channel_dir)
        # Present in any form (a link, a folder, a FIFO): read it, so that such a sidecar is
        # refused as every record is, never skipped (which would import every fence as 0).
        if any(entry.name == FENCES_FILE for entry in listing):
            raw, _ = reading.file_read(channel_dir, FENCES_FILE, limit=RECORD_MAX_BYTES)
            where = channel_dir.child(FENCES_FILE)
            plan.fences = fences_parse(json_record(raw, where, FENCES_CODE), where=where)
    return plan


def _cursors_read(plan: ChannelPlan, channel_dir: Dir, senders: dict[str, str]) -> None:
    with reading.dir_open(channel_dir, CURSORS_DIR) as cursors:
        if cursors is None:
            return
        chosen = [
            entry
            for entry in reading.entries(cursors, limit=MAX_ENTRIES)
            if entry.name.endswith(".txt") and not entry.name.startswith(".")
        ]
        if len(chosen) > MAX_RECORDS:
            raise AppError(
                "IMPORT_LIMIT_EXCEEDED",
                f"{cursors.path}: more than {MAX_RECORDS} cursors",
                detail={"file": cursors.path, "limit": MAX_RECORDS},
            )
        agents: dict[str, str] = {}
        for entry in chosen:
            where = cursors.child(entry.name)
            stem = entry.name[: -len(".txt")]
            if not _is_slug(stem):
                raise _bad_name(where, "a cursor file is named by an agent's slug")
            raw, _ = reading.file_read(cursors, entry.name, limit=CURSOR_MAX_BYTES)
            text = reading.text_decode(raw, where).strip()
            if text and not (DIGITS.fullmatch(text) and len(text) <= SEQ_DIGITS_MAX):
                raise AppError(
                    "IMPORT_INVALID_CURSOR",
                    f"{where}: a cursor holds a message number",
                    detail={"file": where},
                )
            agent = _agent_for_slug(plan, senders, stem)
            if agent in agents:  # two slugs cannot name one agent, but be sure
                raise _bad_name(where, f"{agents[agent]} names the same agent")
            agents[agent] = where
            plan.cursors.append((agent, int(text or "0")))


def _markers_read(
    plan: ChannelPlan, channel_dir: Dir, listing: list[reading.Entry], senders: dict[str, str]
) -> None:
    for entry in listing:
        match = MARKER_CLAIMED_NAME.fullmatch(entry.name)
        if match is None:
            continue
        where = channel_dir.child(entry.name)
        if entry.kind == "link":
            raise AppError(
                "IMPORT_PATH_OUTSIDE_ROOT",
                f"{where} is a symbolic link: links are not followed",
                detail={"file": where},
            )
        if not _is_slug(match.group(2)):
            raise _bad_name(where, "a claimed marker is named by its owner's slug")
        if len(plan.markers) >= MAX_RECORDS:
            raise AppError(
                "IMPORT_LIMIT_EXCEEDED",
                f"{channel_dir.path}: more than {MAX_RECORDS} claimed markers",
                detail={"file": channel_dir.path, "limit": MAX_RECORDS},
            )
        owner = _agent_for_slug(plan, senders, match.group(2))
        plan.markers.append(
            (where, f"task-{match.group(1)}.md", owner, _marker_text(channel_dir, entry))
        )


def _marker_text(channel_dir: Dir, entry: reading.Entry) -> str:
    """A claimed marker's text, kept for the sync to write back. The reference renames the
    file whatever it holds, so a text that cannot be kept (over MARKER_MAX_BYTES, not UTF-8, a
    NUL) never refuses the import: the claim is kept with an empty text."""
    if entry.kind != "file":
        return ""
    try:
        raw, _ = reading.file_read(channel_dir, entry.name, limit=MARKER_MAX_BYTES)
        text = raw.decode("utf-8")
    except (AppError, UnicodeDecodeError):
        return ""
    return "" if "\x00" in text else text


def _records_parsed(
    channel_dir: Dir,
    sub: str,
    *,
    marker: str | None,
    pending_code: str,
    invalid_code: str,
    parse: Callable[[Any, str, str], T],
) -> list[T]:
    """The record files of ``sub`` (``_records``), each read (at most RECORD_MAX_BYTES), as
    JSON (else ``invalid_code``) and parsed: ``parse(data, file name, where)``, whose refusal
    names the file."""
    parsed: list[T] = []
    for directory, name in _records(channel_dir, sub, marker=marker, pending_code=pending_code):
        where = directory.child(name)
        raw, _ = reading.file_read(directory, name, limit=RECORD_MAX_BYTES)
        data = json_record(raw, where, invalid_code)
        try:
            parsed.append(parse(data, name, where))
        except AppError as exc:
            raise in_file(where, exc) from None
    return parsed


def _stem(name: str) -> str:
    return name[: -len(".json")]


def _tasks_read(plan: ChannelPlan, channel_dir: Dir) -> None:
    plan.tasks += _records_parsed(
        channel_dir,
        "tasks",
        marker=None,
        pending_code="LEASE_TRANSACTION_PENDING",
        invalid_code="TASK_INVALID_RECORD",
        parse=lambda data, name, where: task_record_parse(
            data, channel=plan.name, stem=_stem(name), source=where
        ),
    )
    plan.leases += _records_parsed(
        channel_dir,
        "claims",
        marker=LEASE_MARKER,
        pending_code="LEASE_TRANSACTION_PENDING",
        invalid_code="LEASE_INVALID_RECORD",
        parse=lambda data, name, where: lease_record_parse(
            data, channel=plan.name, name=name, source=where
        ),
    )
    tasks_consistency_check(plan.tasks, plan.leases)


def _locks_read(plan: ChannelPlan, channel_dir: Dir) -> None:
    plan.locks += _records_parsed(
        channel_dir,
        "locks",
        marker=LOCK_MARKER,
        pending_code="PATH_LOCK_TRANSACTION_PENDING",
        invalid_code="PATH_LOCK_INVALID_RECORD",
        parse=lambda data, name, where: lock_record_parse(
            data, channel=plan.name, stem=_stem(name), source=where
        ),
    )
    locks_overlap_check(plan.locks)


def folder_plan(root: Path, *, channel: str | None = None) -> list[ChannelPlan]:
    """The first pass over ``root``: every channel folder (or only ``channel``) read and
    judged. Raises IMPORT_ROOT_INVALID, IMPORT_CHANNEL_NOT_FOUND (no channel folder, or not
    the one named), CHANNEL_EXISTS (two folders whose names differ only in case), ID_CONFLICT,
    and the codes of ``channel_plan``."""
    plans: list[ChannelPlan] = []
    with reading.root_open(root) as root_dir:
        if channel is not None:
            check_channel_name(channel)
            names = [channel]
        else:
            names = []
            for entry in reading.entries(root_dir, limit=MAX_ENTRIES):
                if entry.name.startswith((".", "_")):
                    continue
                if entry.kind == "link" and reading.link_to_dir(root_dir, entry.name):
                    # A channel folder elsewhere, maybe out of the root: never followed.
                    raise AppError(
                        "IMPORT_PATH_OUTSIDE_ROOT",
                        f"{entry.name} is a symbolic link to a folder: links are not followed",
                        detail={"file": entry.name},
                    )
                if entry.kind == "dir":
                    names.append(entry.name)
        chosen = []
        for name in names:
            with reading.dir_open(root_dir, name) as directory:
                if directory is None:
                    continue
                kinds = {e.name: e.kind for e in reading.entries(directory, limit=MAX_ENTRIES)}
            if kinds.get(META_FILE) is not None:
                chosen.append(name)
        if not chosen:
            raise AppError(
                "IMPORT_CHANNEL_NOT_FOUND",
                f"no channel folder {channel!r} (one holding {META_FILE}) under {root}"
                if channel is not None
                else f"no channel folder (one holding {META_FILE}) under {root}",
                detail={"root": str(root)},
            )
        if len(chosen) > MAX_CHANNELS:
            raise AppError(
                "IMPORT_LIMIT_EXCEEDED",
                f"more than {MAX_CHANNELS} channels under {root}",
                detail={"limit": MAX_CHANNELS},
            )
        lowered: dict[str, str] = {}
        ids: dict[str, str] = {}
        cache_budget = [CACHE_BYTES]
        for name in chosen:
            if name.lower() in lowered:
                raise AppError(
                    "CHANNEL_EXISTS",
                    f"{name}: differs from channel folder {lowered[name.lower()]} only in case",
                    detail={"file": name},
                )
            lowered[name.lower()] = name
            plan = channel_plan(root_dir, name, cache_budget)
            for message_id in plan.message_ids:
                if message_id in ids:
                    raise AppError(
                        "ID_CONFLICT",
                        f"{name}: message id {message_id!r} is also used in {ids[message_id]}",
                        detail={"file": name, "id": message_id},
                    )
                ids[message_id] = name
            plans.append(plan)
    return plans


def messages_stream(root: Path, plan: ChannelPlan) -> Iterator[ImportedMessage]:
    """The second pass over a channel's messages, in seq order: each file the first pass kept
    checked unchanged (its stat key), each other one read and parsed again. Raises
    IMPORT_FOLDER_CHANGED (a file is not as the first pass read it), and the codes of
    ``message_parse``."""
    with reading.root_open(root) as root_dir, reading.dir_open(root_dir, plan.name) as channel_dir:
        if channel_dir is None:
            raise AppError(
                "IMPORT_FOLDER_CHANGED",
                f"{plan.name}: the channel folder is gone",
                detail={"file": plan.name},
            )
        for seq, name, key in plan.messages:
            cached = plan.cache.pop(seq, None)
            if cached is not None:
                now = reading.stat_key(channel_dir, name)
            else:
                raw, now = reading.file_read(channel_dir, name, limit=MESSAGE_MAX_BYTES)
            if now != key:
                where = channel_dir.child(name)
                raise AppError(
                    "IMPORT_FOLDER_CHANGED",
                    f"{where}: changed while it was imported",
                    detail={"file": where},
                )
            yield cached or message_parse(raw, seq=seq, where=channel_dir.child(name)).message
