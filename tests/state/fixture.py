"""The reference's sample folder (``tests/fixtures/ref-root-sample.tar.gz``) read into the
state summary's pure inputs, without the database: its message files through the reference's
reading rules, its task and lock records as they are."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

from agentchat.folder.render import MESSAGE_NAME
from agentchat.state.messages import MessageFold, text_view
from agentchat.state.summary import summary_of

# A copy of ../shared/fixtures/ref-root-sample.tar.gz (made by the reference 0.7.5, see
# shared/reference/scripts/gen_sample.sh), so that CI has it wherever it runs.
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "ref-root-sample.tar.gz"


def extract(root: Path) -> Path:
    with tarfile.open(FIXTURE) as archive:
        archive.extractall(root, filter="data")
    return root


def folder_summary(
    folder: Path, *, upto: int | None = None, strict: bool = False
) -> dict[str, Any]:
    """The summary of a channel folder by our rules, messages up to seq ``upto``."""
    meta = json.loads((folder / "_meta.json").read_text(encoding="utf-8"))
    files = sorted(
        (int(match.group(1)), path)
        for path in folder.iterdir()
        if (match := MESSAGE_NAME.fullmatch(path.name))
    )
    fold = MessageFold()
    for seq, path in files:
        if upto is None or seq <= upto:
            fold.feed(text_view(seq=seq, stem=path.stem, text=path.read_bytes().decode("utf-8")))

    if strict:
        fold.strict_check()

    def records(sub: str) -> list[dict[str, Any]]:
        return [
            json.loads(path.read_text(encoding="utf-8"))
            for path in sorted((folder / sub).glob("*.json"))
            if not path.name.startswith((".", "_"))
        ]

    return summary_of(
        channel=folder.name,
        topic=str(meta.get("topic") or ""),
        members=meta.get("members") or [],
        created_at=str(meta.get("created_at") or ""),
        fold=fold,
        tasks=records("tasks"),
        locks=records("locks"),
        generated_at="",
    )
