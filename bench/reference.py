"""The reference CLI (``agent-chat-plugin``), driven the way its users run it: one ``agent-chat``
process per operation, installed once into a scratch virtualenv under /tmp and reused.

    from reference import REF_VENV_DEFAULT, Ref, ensure_ref_venv, ref_fill
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from harness import log

# The pinned release, from the one file that names it (.ci/run installs the same).
REF_PACKAGE = next(
    line.strip()
    for line in (Path(__file__).resolve().parent.parent / "requirements-reference.txt")
    .read_text()
    .splitlines()
    if line.strip() and not line.startswith("#")
)
REF_VENV_DEFAULT = Path(tempfile.gettempdir()) / "agentchat-bench-refvenv"


def ensure_ref_venv(path: Path) -> Path:
    """The ``agent-chat`` binary in the venv at ``path``, installed there if missing."""
    binary = path / "bin" / "agent-chat"
    ok = (
        binary.exists()
        and subprocess.run(
            [str(path / "bin" / "python"), "-c", "import chat"], capture_output=True, check=False
        ).returncode
        == 0
    )
    if ok:
        log(f"reusing the reference CLI in {path}")
        return binary
    log(f"installing {REF_PACKAGE} into {path} (cached for later runs)")
    shutil.rmtree(path, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(path)], check=True, timeout=120)
    subprocess.run(
        [str(path / "bin" / "pip"), "install", "-q", "--disable-pip-version-check", REF_PACKAGE],
        check=True,
        timeout=300,
    )
    return binary


class Ref:
    """The reference CLI on one root folder."""

    def __init__(self, binary: Path, root: Path) -> None:
        self.binary, self.root = str(binary), root

    def argv(self, *args: str) -> list[str]:
        return [self.binary, "--root", str(self.root), *args]

    def run(self, *args: str, capture: bool = False) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.argv(*args),
            stdout=subprocess.PIPE if capture else subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            check=True,
            timeout=60,
        )

    def post(self, channel: str, sender: str, title: str, to: str = "all") -> None:
        self.run(
            "post",
            channel,
            "--from",
            sender,
            "--to",
            to,
            "--title",
            title,
            "--body",
            "hello world, " * 8,
        )

    def seqs(self, channel: str) -> list[int]:
        names = (e.name for e in os.scandir(self.root / channel))
        return [int(n.split("-", 1)[0]) for n in names if n.endswith(".md") and n[:1].isdigit()]


def ref_fill(ref: Ref, channel: str, count: int) -> float:
    """Write ``count`` messages in the reference's exact format (REFERENCE-CLI §3.3), and a
    cursor for ``reader`` at the end; the seconds it took."""
    started = time.perf_counter()
    ref.run("init", channel)
    folder = ref.root / channel
    for seq in range(1, count + 1):
        text = (
            f"---\nseq: {seq}\nfrom: filler\nto: all\nchannel: {channel}\n"
            f"ts: 2026-11-29T15:40:43+00:00\nstatus: discussion\ntitle: fill {seq}\n---\n"
            f"filler message {seq}\n"
        )
        (folder / f"{seq:04d}-filler-fill-{seq}.md").write_text(text, encoding="utf-8")
    (folder / ".cursors").mkdir(exist_ok=True)
    (folder / ".cursors" / "reader.txt").write_text(str(count), encoding="utf-8")
    return time.perf_counter() - started
