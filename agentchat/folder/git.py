"""``sync_folder --git-commit``: one commit per sync that changed something, its message saying
what changed, of the sync's own files only.

The root is a repository of its own (``git init`` when it is none) or a folder inside a larger
one. Either way the repository may hold a person's work: files the sync never wrote (a
``.env``, a hidden folder at the root), changes they staged, untracked files. So the commit
stages exactly the paths this sync wrote or removed (``SyncReport.paths``, as literal
pathspecs: a file name with ``*`` or ``:`` is only itself), commits only those paths
(``git commit --only``, which leaves every other entry of the index as the person left it)
and runs the repository's hooks unless asked not to. A commit that fails (a hook that refuses
it) leaves the files written and the sync's paths unstaged again; they are kept in the sync's
state (``.agentchat-sync/git-pending``) and committed with the next sync's, so a change is
never left out of the history because its own commit failed once.

A hook runs with the commit's own index, so what it stages goes into the commit (a ``git add
.env``, a ``git add -u`` taking a person's edits). After the commit the sync compares what it
changed with the sync's own paths; a commit holding anything else is undone (HEAD back where it
was, the index restored from a copy taken before the sync staged anything) and refused like a
failing hook. A hook that changes files in the work tree does so: git gives the sync no way to
stop it, and the sync leaves the work tree as the hook left it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from agentchat.core.rules.errors import AppError
from agentchat.folder.sync import SYNC_DIR, SyncReport

# Used only when git knows no identity of its own (no user.name / user.email configured).
AUTHOR = ("agentchat sync_folder", "sync@agentchat.invalid")
GIT_TIMEOUT = 600
PENDING_FILE = "git-pending"
# The hooks that can refuse a commit (githooks(5)).
_COMMIT_HOOKS = ("pre-commit", "prepare-commit-msg", "commit-msg")


def _env() -> dict[str, str]:
    # Every pathspec is a path: no globs, no magic (``:(exclude)``), whatever a name holds.
    return {**os.environ, "GIT_LITERAL_PATHSPECS": "1"}


def _git(
    root: Path, *args: str, check: bool = True, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    try:
        result = subprocess.run(
            ["git", "-C", str(root), *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT,
            check=False,
            env=_env(),
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise AppError("SYNC_GIT_FAILED", f"git {args[0]}: {exc}") from exc
    if check and result.returncode != 0:
        raise AppError(
            "SYNC_GIT_FAILED",
            f"git {' '.join(args[:2])} failed: {_output(result)}",
        )
    return result


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return (result.stderr.strip() or result.stdout.strip())[-2000:]


def _git_path(root: Path, name: str) -> str:
    """The absolute path of ``name`` in the repository's git directory (worktrees and
    core.hooksPath resolved as git resolves them)."""
    return _git(root, "rev-parse", "--path-format=absolute", "--git-path", name).stdout.strip()


def _inside_work_tree(root: Path) -> bool:
    result = _git(root, "rev-parse", "--is-inside-work-tree", check=False)
    return result.returncode == 0 and result.stdout.strip() == "true"


def git_prepare(root: Path) -> None:
    """Make ``root`` a repository unless it is one or lies inside one, keeping the sync's own
    state out of it (``info/exclude``). Raises SYNC_GIT_FAILED."""
    if not _inside_work_tree(root):
        _git(root, "init", "-q")
    prefix = _git(root, "rev-parse", "--show-prefix").stdout.strip()
    exclude = Path(_git_path(root, "info/exclude"))
    pattern = f"/{prefix}{SYNC_DIR}/"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.exists() else []
    if pattern not in lines:
        exclude.write_text("\n".join([*lines, pattern]) + "\n")


def commit_message(report: SyncReport) -> str:
    """``sync: review #5..#14, 2 tasks`` on the first line, one line per channel after it."""
    changed = report.changed
    lines = [changed_channel.describe() for changed_channel in changed]
    head = f"sync: {len(changed)} channel(s), {report.written} written, {report.removed} removed"
    if len(lines) == 1:
        head = f"sync {lines[0]}"
    if not lines:  # only what an earlier sync wrote and could not commit
        return "sync: what an earlier sync wrote\n"
    return head + "\n\n" + "\n".join(lines) + "\n"


def _relative(root: Path, paths: set[Path]) -> list[str]:
    """The paths under ``root`` (relative to it), never the sync's own state."""
    out = []
    for path in paths:
        try:
            rel = Path(os.path.abspath(path)).relative_to(root)
        except ValueError:
            continue
        if rel.parts and rel.parts[0] != SYNC_DIR:
            out.append(rel.as_posix())
    return sorted(out)


def _pending_load(root: Path) -> list[str]:
    try:
        raw = (root / SYNC_DIR / PENDING_FILE).read_bytes()
    except OSError:
        return []
    return [part for part in raw.decode("utf-8", "surrogateescape").split("\0") if part]


def _pending_save(root: Path, paths: list[str]) -> None:
    target = root / SYNC_DIR / PENDING_FILE
    if not paths:
        target.unlink(missing_ok=True)
        return
    target.write_bytes("\0".join(paths).encode("utf-8", "surrogateescape"))


def _nul(paths: list[str]) -> str:
    return "".join(f"{path}\0" for path in paths)


def _hooks_present(root: Path) -> bool:
    for hook in _COMMIT_HOOKS:
        path = Path(_git_path(root, f"hooks/{hook}"))  # core.hooksPath counts
        if path.is_file() and os.access(path, os.X_OK):
            return True
    return False


def _unstage(root: Path, paths: list[str], *, has_head: bool) -> None:
    """Put the index entries of ``paths`` back as HEAD has them (none: no entry)."""
    if has_head:
        _git(
            root, "reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul", stdin=_nul(paths)
        )
    else:
        _git(
            root,
            *("rm", "-r", "-q", "--cached", "--ignore-unmatch"),
            *("--pathspec-from-file=-", "--pathspec-file-nul"),
            stdin=_nul(paths),
        )


def _ours(name: str, ours: set[str]) -> bool:
    """``name`` (from the top of the work tree) is one of ``ours`` or lies under one."""
    return any(p in ours for p in (name, *(a.as_posix() for a in Path(name).parents)))


def _committed(top: Path, *, root_commit: bool) -> list[str]:
    """The paths HEAD's commit changed (against its parent; every path of a first commit)."""
    listed = _git(
        top,
        *("diff-tree", "--no-commit-id", "--name-only", "--no-renames", "-r", "-z"),
        *(["--root"] if root_commit else []),
        "HEAD",
    ).stdout
    return [name for name in listed.split("\0") if name]


def _index_save(index: Path) -> Path | None:
    """A copy of the index beside it (None: there is no index yet)."""
    if not index.exists():
        return None
    fd, name = tempfile.mkstemp(dir=index.parent, prefix="index.agentchat-sync-")
    os.close(fd)
    shutil.copy2(index, name)  # its mode too (core.sharedRepository)
    return Path(name)


def _undo(top: Path, before: str | None, commit: str, index: Path, saved: Path | None) -> None:
    """Take the commit back (HEAD where it was, or unborn) and put the saved index back."""
    if before:
        _git(top, "update-ref", "-m", "sync_folder: undo", "HEAD", before, commit)
    else:
        _git(top, "update-ref", "-d", "HEAD", commit)
    if saved is None:
        index.unlink(missing_ok=True)
    else:
        os.replace(saved, index)


def _listed(paths: list[str], most: int = 20) -> str:
    more = f" and {len(paths) - most} more" if len(paths) > most else ""
    return ", ".join(paths[:most]) + more


def git_commit(root: Path, report: SyncReport, *, verify: bool = True) -> str | None:
    """Commit what the sync wrote or removed, and nothing else; None (no commit) when that
    changed nothing git tracks. ``verify=False`` skips the commit hooks (``--no-verify``).
    Returns the new commit's id. Raises SYNC_GIT_FAILED, SYNC_GIT_HOOK_FAILED (a hook refused
    the commit: the files stay written, the paths unstaged, and the next sync commits them),
    SYNC_GIT_HOOK_STAGED (a hook staged paths that are not the sync's: the commit is undone,
    the index as it was, and the next sync commits the files)."""
    root = Path(os.path.abspath(root))
    paths = sorted({*_relative(root, report.paths), *_pending_load(root)})
    if not paths:
        return None
    index = Path(_git_path(root, "index"))
    saved = _index_save(index)
    try:
        return _stage_and_commit(root, report, paths, verify=verify, index=index, saved=saved)
    finally:
        if saved is not None:
            saved.unlink(missing_ok=True)


def _stage_and_commit(
    root: Path,
    report: SyncReport,
    paths: list[str],
    *,
    verify: bool,
    index: Path,
    saved: Path | None,
) -> str | None:
    # Every command runs at the top of the work tree with paths from there: from a
    # subdirectory, git rm --pathspec-from-file takes the directory itself for a pathspec too.
    top = Path(_git(root, "rev-parse", "--show-toplevel").stdout.strip())
    prefix = _git(root, "rev-parse", "--show-prefix").stdout.strip()
    present = [prefix + path for path in paths if os.path.lexists(root / path)]
    gone = [prefix + path for path in paths if not os.path.lexists(root / path)]
    if present:
        _git(
            top,
            *("add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul"),
            stdin=_nul(present),
        )
    if gone:
        _git(
            top,
            *("rm", "-r", "-q", "--cached", "--ignore-unmatch"),
            *("--pathspec-from-file=-", "--pathspec-file-nul"),
            stdin=_nul(gone),
        )
    head = _git(top, "rev-parse", "-q", "--verify", "HEAD", check=False)
    has_head = head.returncode == 0
    # What now differs from HEAD among our paths (a removed directory: every file under it).
    if has_head:
        listed = _git(top, "diff", "--cached", "--name-only", "--no-renames", "-z").stdout
    else:
        listed = _git(top, "ls-files", "-z", "--cached").stdout
    ours = {*present, *gone}
    changed = [name for name in listed.split("\0") if name and _ours(name, ours)]
    if not changed:
        _pending_save(root, [])
        return None
    identity: list[str] = []
    if _git(top, "config", "user.email", check=False).returncode != 0:
        identity = ["-c", f"user.name={AUTHOR[0]}", "-c", f"user.email={AUTHOR[1]}"]
    message_file = root / SYNC_DIR / "git-message"
    message_file.write_text(commit_message(report))
    result = _git(
        top,
        *identity,
        *("commit", "-q", "--only", "-F", str(message_file)),
        *([] if verify else ["--no-verify"]),
        *("--pathspec-from-file=-", "--pathspec-file-nul"),
        stdin=_nul(sorted(changed)),
        check=False,
    )
    message_file.unlink(missing_ok=True)
    if result.returncode != 0:
        _unstage(top, changed, has_head=has_head)
        _pending_save(root, paths)
        if verify and _hooks_present(top):
            raise AppError(
                "SYNC_GIT_HOOK_FAILED",
                "a git hook refused the sync's commit (the files are written and will be "
                "committed with the next sync's; --git-no-verify skips the hooks): "
                + _output(result),
            )
        raise AppError("SYNC_GIT_FAILED", f"git commit failed: {_output(result)}")
    commit = _git(top, "rev-parse", "HEAD").stdout.strip()
    foreign = [name for name in _committed(top, root_commit=not has_head) if not _ours(name, ours)]
    if foreign:
        _undo(top, head.stdout.strip() if has_head else None, commit, index, saved)
        _pending_save(root, paths)
        raise AppError(
            "SYNC_GIT_HOOK_STAGED",
            "a git hook staged paths that are not the sync's, so its commit is undone and the "
            "index is as it was (the files are written and will be committed with the next "
            "sync's; --git-no-verify skips the hooks): " + _listed(foreign),
        )
    _pending_save(root, [])
    return commit
