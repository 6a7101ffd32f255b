"""The state summary within a byte budget: its long texts shortened, each with a marker.

A summary holds every decision, blocker and evidence message whole (the reference's format), so a
channel of 80 decisions of 500 KB makes a 40 MB summary. The synced folder's ``state.md`` keeps
it whole (byte for byte the reference's); the API's answer (``agentchat.state.api``) and the
dashboard's page are bounded instead:

- ``summary_shortened(summary, limit, marker)``: a copy whose texts taken from messages (a
  decision's ``details``, a message blocker's ``details``, a message's verification
  ``evidence``) longer than ``limit`` UTF-8 bytes are cut to at most ``limit`` bytes (at a line
  end in the limit's second half when there is one, else at a character) followed by
  ``marker(seq, characters)``: the message that holds the whole text and its length.
- ``summary_bounded(summary, render, max_bytes, marker)``: ``render(summary)`` when that fits in
  ``max_bytes``, unchanged; else the texts shortened to 4,096 bytes, then 1,024, 256 and none,
  the first that fits; else STATE_TOO_LARGE (the entries themselves are over the budget).

Nothing else changes: the entries, their order and keys, the other fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from agentchat.core.rules.errors import AppError

# The lengths (UTF-8 bytes) a bounded answer tries, longest first.
TEXT_LIMITS = (4096, 1024, 256, 0)
# The fields that hold a message's text, per section: (section, field).
TEXT_FIELDS = (("decisions", "details"), ("blockers", "details"), ("verification", "evidence"))

Marker = Callable[[int | None, int], str]


def cut_point(text: str, limit: int) -> int | None:
    """Where to cut ``text`` so that what comes before is at most ``limit`` UTF-8 bytes: after
    the last line end in the second half of the limit, else after the last whole character;
    None when the whole text fits."""
    if len(text) <= limit // 4 or len(text.encode("utf-8")) <= limit:
        return None
    head = text[:limit].encode("utf-8")[:limit].decode("utf-8", "ignore")
    line_end = head.rfind("\n")
    return line_end + 1 if line_end + 1 > limit // 2 else len(head)


def text_cut(text: str, limit: int) -> str | None:
    """``text`` cut at ``cut_point`` (trailing white space dropped), or None when it fits."""
    point = cut_point(text, limit)
    return None if point is None else text[:point].rstrip()


def _message_seq(section: str, item: dict[str, Any]) -> int | None:
    """The seq of the message an entry's text comes from (None for a task's)."""
    if section == "decisions":
        return int(item["seq"])
    if section == "blockers" and item.get("kind") == "message":
        digits = str(item.get("source_id", "")).lstrip("#")
    elif section == "verification" and item.get("source_type") == "message":
        digits = str(item.get("source_id", ""))
    else:
        return None
    return int(digits) if digits.isdigit() else None


def summary_shortened(
    summary: dict[str, Any], *, limit: int, marker: Marker
) -> tuple[dict[str, Any], bool]:
    """A copy of ``summary`` with its message texts over ``limit`` bytes cut, each followed by
    ``marker(seq, characters)``; and whether any was cut. ``summary`` is left as it is."""
    shortened = dict(summary)
    cut_any = False
    for section, name in TEXT_FIELDS:
        entries = []
        for item in summary[section]:
            text = item.get(name)
            head = text_cut(text, limit) if isinstance(text, str) else None
            if head is None:
                entries.append(item)
                continue
            cut_any = True
            marked = marker(_message_seq(section, item), len(text))
            entries.append({**item, name: f"{head}{marked}" if head else marked.lstrip()})
        shortened[section] = entries
    return shortened, cut_any


def texts_size(summary: dict[str, Any]) -> int:
    """The characters of the summary's message texts: a lower bound of any rendering's bytes."""
    return sum(
        len(item.get(name) or "") for section, name in TEXT_FIELDS for item in summary[section]
    )


def summary_bounded(
    summary: dict[str, Any],
    render: Callable[[dict[str, Any], bool], bytes],
    *,
    max_bytes: int,
    marker: Marker,
) -> tuple[bytes, bool]:
    """``render(summary, False)`` when it fits in ``max_bytes``; else ``render(shortened,
    True)`` of the first shortening (``TEXT_LIMITS``) that fits; and whether it was shortened.
    Raises STATE_TOO_LARGE when even the texts' markers alone do not fit."""
    size: int | None = None  # of the last rendering tried
    if texts_size(summary) <= max_bytes:  # else the whole one cannot fit: not rendered
        whole = render(summary, False)
        if len(whole) <= max_bytes:
            return whole, False
        size = len(whole)
    for limit in TEXT_LIMITS:
        shortened, cut = summary_shortened(summary, limit=limit, marker=marker)
        if not cut and size is not None:
            continue  # no text is over this limit: the same texts as the last one tried
        body = render(shortened, True)
        if len(body) <= max_bytes:
            return body, True
        size = len(body)
    raise AppError(
        "STATE_TOO_LARGE",
        f"the state summary is over {max_bytes} bytes even with every message text shortened "
        f"({size} bytes): list the open tasks and the locks page by page (tasks/, locks/), or "
        "ask the operator to raise AGENTCHAT_STATE_MAX_BYTES",
        detail={"max_bytes": max_bytes, "bytes": size},
    )


def api_marker(seq: int | None, characters: int) -> str:
    """The API's marker after a shortened text (docs/state.md): stable, ``[truncated by the
    server: ...]``."""
    where = f"; the whole text is message #{seq:04d}" if seq is not None else ""
    return f" … [truncated by the server: {characters} characters in all{where}]"
