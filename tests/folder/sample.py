"""Reference folders of any size, written byte for byte as the reference CLI writes them
(REFERENCE-CLI §3.2-3.4, §3.12): ``_meta.json``, message files (directed, multi-recipient,
broadcast, replies, a status event every 100 messages) and cursors. Filling one through the
reference's own ``post`` is quadratic (a directory scan per post: 14 s for 5,000), so the
tests and ``bench/bench_import.py`` write the files directly."""

from __future__ import annotations

import json
from pathlib import Path

MEMBERS = ("alice", "bob", "carol", "dave")


def _slug(text: str) -> str:
    import re

    cut = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40].rstrip("-")
    return cut or "msg"


def write_reference_channel(root: Path, name: str, count: int) -> Path:
    """``root/name`` holding ``count`` messages; returns the channel folder."""
    channel = root / name
    (channel / ".cursors").mkdir(parents=True)
    meta = {
        "channel": name,
        "members": list(MEMBERS),
        "topic": f"bulk {name}",
        "created": "2026-11-29T15:46:18+00:00",
    }
    (channel / "_meta.json").write_text(json.dumps(meta, indent=2), encoding="ascii")
    for seq in range(1, count + 1):
        sender = MEMBERS[seq % len(MEMBERS)]
        ts = f"2026-11-29T{15 + seq // 3600 % 8:02d}:{seq // 60 % 60:02d}:{seq % 60:02d}+00:00"
        if seq % 100 == 0:
            status, title = "event.status", "event:status"
            body = json.dumps(
                {
                    "agent": sender,
                    "event": "status",
                    "harness": "bench",
                    "schema_version": 1,
                    "status": "busy",
                    "ts": ts,
                },
                sort_keys=True,
                separators=(",", ":"),
            )
            to = "all"
        else:
            status, title = "discussion", f"Message {seq}: progress on item {seq % 17}"
            body = f"Line one of message {seq}.\n\nSome **markdown** and `code`.\n"
            to = (
                "all",
                MEMBERS[(seq + 1) % 4],
                f"{MEMBERS[(seq + 1) % 4]},{MEMBERS[(seq + 2) % 4]}",
            )[seq % 3]
        lines = ["---", f"seq: {seq}", f"from: {sender}", f"to: {to}"]
        if seq > 1 and seq % 5 == 0:
            lines.append(f"reply_to: {seq - 1}")
        lines += [f"channel: {name}", f"ts: {ts}", f"status: {status}", f"title: {title}", "---"]
        text = "\n".join(lines) + "\n" + body.rstrip() + "\n"
        (channel / f"{seq:04d}-{_slug(sender)}-{_slug(title)}.md").write_text(
            text, encoding="utf-8"
        )
    for member in MEMBERS[:2]:
        (channel / ".cursors" / f"{member}.txt").write_text(str(count // 2), encoding="ascii")
    return channel
