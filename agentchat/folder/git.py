"""``sync_folder --git-commit``: the synced root as a git repository, one commit per sync that
changed something, its message saying what changed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentchat.core.errors import AppError
from agentchat.folder.sync import SYNC_DIR, SyncReport

# Used only when git knows no identity of its own (no user.name / user.email configured).
AUTHOR = ("agentchat sync_folder", "sync@agentchat.invalid")
GIT_TIMEOUT = 600


def _git(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), *args],
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AppError("SYNC_GIT_FAILED", f"git {args[0]}: {exc}") from exc
    if check and result.returncode != 0:
        raise AppError(
            "SYNC_GIT_FAILED",
            f"git {' '.join(args[:2])} failed: {(result.stderr or result.stdout).strip()[:500]}",
        )
    return result


def git_prepare(root: Path) -> None:
    """Make ``root`` a repository if it is not one, keeping the sync's own state out of it.
    Raises SYNC_GIT_FAILED."""
    if not (root / ".git").exists():
        _git(root, "init", "-q")
    exclude = root / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if f"/{SYNC_DIR}/" not in lines:
        exclude.write_text("\n".join([*lines, f"/{SYNC_DIR}/"]) + "\n")


def commit_message(report: SyncReport) -> str:
    """``sync: review #5..#14, 2 tasks`` on the first line, one line per channel after it."""
    changed = report.changed
    lines = [changed_channel.describe() for changed_channel in changed]
    head = f"sync: {len(changed)} channel(s), {report.written} written, {report.removed} removed"
    if len(lines) == 1:
        head = f"sync {lines[0]}"
    if not lines:  # the files were already there, only not committed
        return "sync: the folder as the database has it\n"
    return head + "\n\n" + "\n".join(lines) + "\n"


def git_commit(root: Path, report: SyncReport) -> str | None:
    """Commit everything the sync changed; None (no commit) when the tree is as committed.
    Returns the new commit's id. Raises SYNC_GIT_FAILED."""
    _git(root, "add", "--all", ".")
    if _git(root, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return None
    identity: list[str] = []
    if _git(root, "config", "user.email", check=False).returncode != 0:
        identity = ["-c", f"user.name={AUTHOR[0]}", "-c", f"user.email={AUTHOR[1]}"]
    result = subprocess.run(
        ["git", "-C", str(root), *identity, "commit", "-q", "--no-verify", "-F", "-"],
        input=commit_message(report),
        capture_output=True,
        text=True,
        timeout=GIT_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        raise AppError("SYNC_GIT_FAILED", f"git commit failed: {result.stderr.strip()[:500]}")
    return _git(root, "rev-parse", "HEAD").stdout.strip()
