"""What the state summary takes from messages: each message read as the reference CLI reads its
file in a synced folder (REFERENCE-CLI §3.3, §3.14), then folded, in seq order, into the
decisions, the message blockers, the verification evidence and the "verified by" actors of done
tasks.

A message is judged by its file text (``agentchat.folder.render.message_text``) and nothing
else, so our extra frontmatter keys (``id``, ``data``, an imported file's ``type: decision``…)
count as the reference counts them, and its quirks are kept:

- the text is read with universal newlines (a CR or CRLF in a body becomes LF);
- frontmatter: the first line must start with ``---``; lines up to one that strips to ``---``
  are split on their first ``:``, key and value stripped; no closing line, no frontmatter;
- the body is what follows the second ``---`` *anywhere* in the text, stripped (a title holding
  ``---`` shifts it);
- title = ``title`` or the file name's stem; author = ``from`` or ``unknown``; time = ``time``
  or ``ts``; ``type`` and ``status`` compared lowercased;
- a ``lease.completed`` / ``task.updated`` message whose body is JSON naming that event, status
  ``done`` and a ``task_id`` makes its sender the task's "verified by" actor (the last wins).

The fold is append-only (messages are immutable), so a compaction folds the channel outside
its write transaction and only the messages posted meanwhile inside it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from agentchat.core.rules.errors import AppError
from agentchat.folder.render import message_name, message_text
from channels_app import events
from channels_app.models import Channel, Message
from channels_app.selectors import message_iter_after

# The columns message_text reads: nothing else of a message is loaded (a column it reads that
# is missing here costs one more query per message).
TEXT_FIELDS = (
    "id",
    "seq",
    "sender",
    "sender_kind",
    "imported",
    "claimed_sender_kind",
    "to",
    "reply_to",
    "ts",
    "ts_text",
    "status",
    "title",
    "body",
    "conversation_id",
    "correlation_id",
    "content_type",
    "data",
    "metadata",
    "frontmatter",
    "signal_type",
)
CHUNK = 500

COMPLETION_EVENTS = frozenset({"lease.completed", "task.updated"})


def malformed(message: str, **detail: Any) -> AppError:
    return AppError("STATE_MALFORMED_SOURCE", message, detail=detail)


def universal_newlines(text: str) -> str:
    """The text as Python's text-mode reading gives it (the reference's ``read_text``)."""
    if "\r" not in text:
        return text
    return text.replace("\r\n", "\n").replace("\r", "\n")


def frontmatter_parse(text: str) -> dict[str, str]:
    """The reference's frontmatter reader on a file's (newline-translated) text."""
    first, _, rest = text.partition("\n")
    if not first.startswith("---"):
        return {}
    meta: dict[str, str] = {}
    for line in rest.split("\n"):
        if line.strip() == "---":
            return meta
        if ":" in line:
            key, value = line.split(":", 1)
            meta[key.strip()] = value.strip()
    return {}  # never closed


def body_extract(text: str) -> str:
    """The reference's body: after the second ``---`` anywhere in the text, stripped."""
    parts = text.split("---", 2)
    return parts[2].strip() if len(parts) >= 3 else text.strip()


@dataclass(frozen=True)
class MessageView:
    """One message as the reference's state summary sees its file."""

    seq: int
    stem: str  # the file name without ``.md``
    meta: dict[str, str]
    body: str

    @property
    def author(self) -> str:
        return self.meta.get("from") or "unknown"

    @property
    def time(self) -> str:
        return self.meta.get("time") or self.meta.get("ts") or ""

    @property
    def title(self) -> str:
        return self.meta.get("title") or self.stem


def text_view(*, seq: int, stem: str, text: str) -> MessageView:
    """A message file's text (``stem``: its name without ``.md``) as the reference reads it."""
    text = universal_newlines(text)
    return MessageView(seq=seq, stem=stem, meta=frontmatter_parse(text), body=body_extract(text))


def message_view(message: Message, *, channel: str) -> MessageView:
    """A message as the reference reads its file in a synced folder."""
    return text_view(
        seq=message.seq,
        stem=message_name(message)[: -len(".md")],
        text=message_text(message, channel=channel),
    )


def _starts(lowered: str, *prefixes: str) -> bool:
    return lowered.startswith(prefixes)


def _clean(title: str, prefix: re.Pattern[str]) -> str:
    return prefix.sub("", title).strip() or title


def _heading(pattern: re.Pattern[str], body: str) -> bool:
    return "#" in body and pattern.search(body) is not None


@dataclass(frozen=True)
class Mark:
    """How the reference's ``state`` tells a decision, a blocker or a verification: the
    message's type among ``kinds``, its status among ``statuses``, a frontmatter key among
    ``keys``, its lowered title starting with one of ``starts``, or a markdown ``heading``;
    its title is shown without ``prefix``."""

    kinds: frozenset[str]
    statuses: frozenset[str]
    keys: tuple[str, ...]
    starts: tuple[str, ...]
    heading: re.Pattern[str]
    prefix: re.Pattern[str]

    def on(self, view: MessageView, kind: str, status: str, lowered: str) -> bool:
        return (
            kind in self.kinds
            or status in self.statuses
            or any(key in view.meta for key in self.keys)
            or _starts(lowered, *self.starts)
            or _heading(self.heading, view.body)
        )

    def title(self, title: str) -> str:
        return _clean(title, self.prefix)


def _heading_re(words: str) -> re.Pattern[str]:
    return re.compile(rf"^#+\s*{words}\b", re.IGNORECASE | re.MULTILINE)


def _prefix_re(words: str) -> re.Pattern[str]:
    return re.compile(rf"^{words}:\s*", re.IGNORECASE)


BLOCKER_WORDS = frozenset({"blocker", "blocked"})
DECISION = Mark(
    frozenset({"decision"}),
    frozenset({"decision"}),
    ("decision",),
    ("decision:", "[decision]"),
    _heading_re("Decision"),
    _prefix_re("decision"),
)
BLOCKER = Mark(
    BLOCKER_WORDS,
    BLOCKER_WORDS,
    ("blocker",),
    ("blocker:", "[blocker]"),
    _heading_re("Blocker"),
    _prefix_re("blocker"),
)
VERIFICATION = Mark(
    frozenset({"verification", "evidence", "test"}),
    frozenset({"verified", "verified-by", "verification"}),
    ("verification", "evidence"),
    ("verification:", "evidence:", "[verification]"),
    _heading_re("(Verification|Evidence)"),
    _prefix_re("(verification|evidence)"),
)


def completed_task(view: MessageView, status: str) -> str | None:
    """The task id a completion audit names (see the module doc), else None. Raises
    STATE_MALFORMED_SOURCE for a body the reference's JSON reader cannot get through (nested
    past its recursion limit, an integer past its digit limit: the reference's ``state``
    stops with a traceback there)."""
    try:
        event = json.loads(view.body)
    except json.JSONDecodeError:
        return None
    except (ValueError, RecursionError):
        raise malformed(
            f"message #{view.seq}: its {status} body is JSON the reference cannot read",
            seq=view.seq,
        ) from None
    if (
        isinstance(event, dict)
        and event.get("event") == status
        and event.get("status") == "done"
        and isinstance(event.get("task_id"), str)
    ):
        return event["task_id"]
    return None


def event_check(view: MessageView) -> None:
    """A message labelled ``event.*`` must carry a valid event (the reference's ``event read``
    fails on the whole channel otherwise). Raises STATE_MALFORMED_SOURCE."""
    try:
        events.event_parse(view.body, where=f"#{view.seq}")
    except AppError as exc:
        raise malformed(
            f"message #{view.seq}: labelled {view.meta.get('status')} but its body is no "
            f"valid event ({exc.code})",
            seq=view.seq,
            reason=exc.code,
        ) from None


# Bumped whenever what a fold keeps changes: a stored fold of another version is refolded.
FOLD_VERSION = 1


@dataclass
class MessageFold:
    """The message part of a summary, fed messages in ascending seq. Lenient, as the
    reference's default: a message the reference could not get through (``completed_task``,
    ``event_check``) is passed over, and the first one is kept in ``malformed`` for strict
    mode to raise (``strict_check``). A fold is a value (``state()``, ``from_state``): messages
    are immutable, so a compaction stores its fold and later summaries go on from it."""

    last_seq: int = 0
    decisions: list[dict[str, Any]] = field(default_factory=list)
    blockers: list[dict[str, Any]] = field(default_factory=list)
    verification: list[dict[str, Any]] = field(default_factory=list)
    completion_actors: dict[str, str] = field(default_factory=dict)
    malformed: dict[str, Any] | None = None

    def _malformed(self, error: AppError) -> None:
        if self.malformed is None:
            self.malformed = {"message": error.message, "detail": dict(error.detail)}

    def strict_check(self) -> None:
        """Raises STATE_MALFORMED_SOURCE for the first malformed message folded."""
        if self.malformed is not None:
            raise malformed(self.malformed["message"], **self.malformed["detail"])

    def feed(self, view: MessageView) -> None:
        self.last_seq = max(self.last_seq, view.seq)
        raw_status = view.meta.get("status") or ""
        kind = (view.meta.get("type") or "").lower()
        status = raw_status.lower()
        author, time, title = view.author, view.time, view.title
        lowered = title.lower()
        if status in COMPLETION_EVENTS:
            try:
                task_id = completed_task(view, status)
            except AppError as exc:
                self._malformed(exc)
                task_id = None
            if task_id is not None:
                self.completion_actors[task_id] = author
        if raw_status.startswith(events.STATUS_PREFIX) and self.malformed is None:
            try:
                event_check(view)
            except AppError as exc:
                self._malformed(exc)
        if DECISION.on(view, kind, status, lowered):
            self.decisions.append(
                {
                    "seq": view.seq,
                    "title": DECISION.title(title),
                    "author": author,
                    "time": time,
                    "details": view.body,
                    "source": f"message:{view.seq:04d}",
                }
            )
        if BLOCKER.on(view, kind, status, lowered):
            self.blockers.append(
                {
                    "kind": "message",
                    "source_id": f"#{view.seq:04d}",
                    "title": BLOCKER.title(title),
                    "details": view.body,
                    "author": author,
                    "time": time,
                    "blocking_items": [],
                }
            )
        if VERIFICATION.on(view, kind, status, lowered):
            self.verification.append(
                {
                    "source_type": "message",
                    "source_id": str(view.seq),
                    "author": author,
                    "time": time,
                    "title": VERIFICATION.title(title),
                    "evidence": view.body,
                    "acceptance": [],
                }
            )

    def feed_all(self, views: Iterable[MessageView]) -> MessageFold:
        for view in views:
            self.feed(view)
        return self

    def state(self) -> dict[str, Any]:
        """The fold as JSON (``StateSnapshot.fold``)."""
        return {
            "version": FOLD_VERSION,
            "last_seq": self.last_seq,
            "decisions": self.decisions,
            "blockers": self.blockers,
            "verification": self.verification,
            "completion_actors": self.completion_actors,
            "malformed": self.malformed,
        }

    @classmethod
    def from_state(cls, state: Any) -> MessageFold | None:
        """A fold back from ``state()``; None for anything else (another version, no fold)."""
        if not isinstance(state, dict) or state.get("version") != FOLD_VERSION:
            return None
        return cls(
            last_seq=state["last_seq"],
            decisions=list(state["decisions"]),
            blockers=list(state["blockers"]),
            verification=list(state["verification"]),
            completion_actors=dict(state["completion_actors"]),
            malformed=state["malformed"],
        )


def message_views(
    channel: Channel, *, after: int = 0, chunk_size: int = CHUNK, limit: int | None = None
) -> Iterator[MessageView]:
    """The channel's messages after seq ``after``, ascending (the first ``limit`` of them),
    streamed ``chunk_size`` rows at a time with only the columns their file text needs."""
    rows = message_iter_after(
        channel=channel, after=after, fields=TEXT_FIELDS, chunk_size=chunk_size, limit=limit
    )
    for message in rows:
        yield message_view(message, channel=channel.name)
