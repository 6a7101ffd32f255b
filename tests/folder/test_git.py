"""``sync_folder --git-commit`` in real git repositories: it commits the files the sync wrote or
removed and nothing else (a person's ``.env``, hidden folders, staged and untracked work stay
as they were), commits nothing when the sync changed nothing, runs the hooks (a refusal is
reported, the files stay written and are committed later), undoes a commit into which a hook
staged anything not the sync's, and works in a subfolder of a larger repository."""

from __future__ import annotations

import contextlib
import io
import subprocess
from pathlib import Path

import pytest
from django.core.management import load_command_class

from agentchat.core.rules.errors import AppError
from agentchat.folder.git import git_commit, git_prepare
from agentchat.folder.sync import folder_sync
from channels_app.services import channel_create, message_post
from tests.folder import scenario

pytestmark = pytest.mark.django_db(transaction=True)

IDENTITY = ("-c", "user.name=Person", "-c", "user.email=person@example.invalid")


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *IDENTITY, *args], capture_output=True, text=True, check=True
    ).stdout


def commits(root: Path) -> list[str]:
    return git(root, "log", "--format=%H").splitlines()


def committed_files(root: Path, commit: str = "HEAD") -> list[str]:
    return git(root, "show", "--name-only", "--format=", commit).split()


def sync_commit(root: Path, **kwargs: bool) -> str | None:
    return git_commit(root, folder_sync(root=root), **kwargs)


def manage(*args: str) -> subprocess.CompletedProcess[str]:
    """``manage.py sync_folder ARGS`` run in this process, as ``manage.py`` runs it (the same
    argument parsing, system checks, output streams, no terminal, and exit status), without
    the start of a Django process per call: the command as a process is
    tests/folder/test_command.py's subject, git's behaviour is this module's."""
    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        command = load_command_class("agentchat", "sync_folder")  # its streams: out, err
        try:
            command.run_from_argv(["manage.py", "sync_folder", *args])
        except SystemExit as exc:  # run_from_argv's exit on a CommandError
            code = exc.code if isinstance(exc.code, int) else 1
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def refusing_hook(repo: Path) -> None:
    hook = repo / ".git" / "hooks" / "pre-commit"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text("#!/bin/sh\necho 'refused: policy says no' >&2\nexit 1\n")
    hook.chmod(0o755)


def test_a_persons_env_hidden_folder_staged_and_untracked_files_are_never_committed(
    tmp_path: Path,
) -> None:
    channel = scenario.build()
    root = tmp_path / "audit"
    root.mkdir()
    git_prepare(root)
    assert sync_commit(root) is not None
    (root / ".env").write_text("SECRET=1\n")
    (root / ".private").mkdir()
    (root / ".private" / "key").write_text("k")
    (root / ".staged.txt").write_text("mine, staged\n")
    git(root, "add", ".staged.txt")
    index_before = git(root, "ls-files", "--stage", ".staged.txt")

    scenario.post(channel, 2)
    commit = sync_commit(root)

    assert commit is not None
    assert all(name.startswith("review/") for name in committed_files(root)), committed_files(root)
    tracked = git(root, "ls-tree", "-r", "--name-only", "HEAD").split()
    assert not {".env", ".private/key", ".staged.txt"} & set(tracked)
    status = git(root, "status", "--porcelain", "--untracked-files=all").splitlines()
    assert sorted(status) == ["?? .env", "?? .private/key", "A  .staged.txt"]
    assert git(root, "ls-files", "--stage", ".staged.txt") == index_before


def test_no_commit_when_the_sync_wrote_nothing(tmp_path: Path) -> None:
    scenario.build()
    root = tmp_path / "audit"
    root.mkdir()
    git_prepare(root)
    sync_commit(root)
    (root / ".env").write_text("SECRET=1\n")  # something git would see, that is not ours

    report = folder_sync(root=root)
    assert report.written == report.removed == 0
    assert git_commit(root, report) is None
    assert len(commits(root)) == 1
    assert git(root, "status", "--porcelain") == "?? .env\n"


def test_removed_files_are_committed_as_removals(tmp_path: Path) -> None:
    scenario.build()
    gone = channel_create(name="gone", created_by="alice")
    message_post(channel=gone, sender="alice", title="soon gone", body="x")
    root = tmp_path / "audit"
    root.mkdir()
    git_prepare(root)
    sync_commit(root)
    assert any(name.startswith("gone/") for name in git(root, "ls-files").split())
    gone.delete()
    assert sync_commit(root) is not None
    assert not [name for name in git(root, "ls-files").split() if name.startswith("gone/")]
    assert git(root, "status", "--porcelain") == ""


def test_a_failing_pre_commit_hook_stops_the_commit_and_is_reported(tmp_path: Path) -> None:
    channel = scenario.build()
    root = tmp_path / "audit"
    first = manage("--root", str(root), "--git-commit")
    assert first.returncode == 0, first.stderr
    refusing_hook(root)
    (root / ".staged.txt").write_text("mine\n")
    git(root, "add", ".staged.txt")
    scenario.post(channel, 2)

    refused = manage("--root", str(root), "--git-commit")

    assert refused.returncode != 0
    assert "SYNC_GIT_HOOK_FAILED: " in refused.stderr
    assert refused.stdout.startswith("synced 1 channel(s): ")
    assert "refused: policy says no" in refused.stderr
    assert len(commits(root)) == 1
    assert sorted(p.name for p in (root / "review").glob("000[89]-*.md"))  # written
    # Nothing of the sync's is left staged; the person's staged file is.
    assert git(root, "diff", "--cached", "--name-only") == ".staged.txt\n"

    # The flag skips the hook; the files the refused commit left out are committed now, though
    # this sync writes nothing new.
    skipped = manage("--root", str(root), "--git-commit", "--git-no-verify")
    assert skipped.returncode == 0, skipped.stderr
    assert "committed" in skipped.stdout
    assert len(commits(root)) == 2
    assert git(root, "log", "-1", "--format=%s") == "sync: what an earlier sync wrote\n"
    names = committed_files(root)
    assert any(name.startswith("review/0008-") for name in names)
    assert ".staged.txt" not in names
    assert git(root, "diff", "--cached", "--name-only") == ".staged.txt\n"


def test_the_hook_runs_and_its_refusal_is_an_app_error(tmp_path: Path) -> None:
    scenario.build()
    root = tmp_path / "audit"
    root.mkdir()
    git_prepare(root)
    refusing_hook(root)
    with pytest.raises(AppError) as raised:
        sync_commit(root)
    assert raised.value.code == "SYNC_GIT_HOOK_FAILED"
    assert commits_or_none(root) == []
    assert git(root, "ls-files") == ""  # the index as it was (empty)
    assert sync_commit(root, verify=False) is not None


def commits_or_none(root: Path) -> list[str]:
    result = subprocess.run(
        ["git", "-C", str(root), "log", "--format=%H"], capture_output=True, text=True
    )
    return result.stdout.splitlines() if result.returncode == 0 else []


def test_a_root_inside_a_larger_repository_commits_there_only_its_files(tmp_path: Path) -> None:
    channel = scenario.build()
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "README.md").write_text("project\n")
    git(repo, "add", "README.md")
    git(repo, "commit", "-q", "-m", "start")
    (repo / "notes.txt").write_text("staged work\n")
    git(repo, "add", "notes.txt")
    (repo / "scratch.txt").write_text("untracked\n")
    root = repo / "docs" / "audit"
    root.mkdir(parents=True)

    first = manage("--root", str(root), "--git-commit")
    assert first.returncode == 0, first.stderr

    assert not (root / ".git").exists()  # no repository of its own
    names = committed_files(repo)
    assert names and all(name.startswith("docs/audit/review/") for name in names)
    status = sorted(git(repo, "status", "--porcelain").splitlines())
    assert status == ["?? scratch.txt", "A  notes.txt"]  # .agentchat-sync excluded

    scenario.post(channel, 1)
    again = manage("--root", str(root), "--git-commit")
    assert again.returncode == 0, again.stderr
    assert len(commits(repo)) == 3
    names = committed_files(repo)
    assert all(name.startswith("docs/audit/review/") for name in names)
    assert [name for name in names if name.endswith(".md")] == [
        "docs/audit/review/0008-alice-note-0.md"
    ]
    assert sorted(git(repo, "status", "--porcelain").splitlines()) == status

    # A removal there (the git rm of the sync's paths, from a subdirectory).
    gone = channel_create(name="gone", created_by="alice")
    message_post(channel=gone, sender="alice", title="soon gone", body="x")
    assert sync_commit(root) is not None
    assert any(name.startswith("docs/audit/gone/") for name in git(repo, "ls-files").split())
    gone.delete()
    assert sync_commit(root) is not None
    assert not any(name.startswith("docs/audit/gone/") for name in git(repo, "ls-files").split())
    assert sorted(git(repo, "status", "--porcelain").splitlines()) == status


def test_in_a_larger_repository_its_hooks_path_hooks_run_too(tmp_path: Path) -> None:
    channel = scenario.build()
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "core.hooksPath", "tools/hooks")  # relative to the top, as git reads it
    refusing = repo / "tools" / "hooks" / "pre-commit"
    refusing.parent.mkdir(parents=True)
    refusing.write_text("#!/bin/sh\necho 'refused from tools/hooks' >&2\nexit 1\n")
    refusing.chmod(0o755)
    root = repo / "docs" / "audit"
    root.mkdir(parents=True)
    git_prepare(root)
    scenario.post(channel, 1)
    with pytest.raises(AppError) as raised:
        sync_commit(root)
    assert raised.value.code == "SYNC_GIT_HOOK_FAILED", raised.value.message
    assert "refused from tools/hooks" in raised.value.message
    assert git(repo, "diff", "--cached", "--name-only") == ""


# A hook runs with the commit's own index (GIT_INDEX_FILE): what it stages goes into the commit.
# The sync checks the commit against its own paths and undoes one that holds anything else.


def hook(repo: Path, script: str) -> Path:
    path = repo / ".git" / "hooks" / "pre-commit"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nset -e\n" + script + "\n")
    path.chmod(0o755)
    return path


def persons_project(tmp_path: Path) -> tuple[Path, Path]:
    """A person's repository (a committed app.py with a staged edit and an unstaged one on top,
    an untracked .env and notes.txt) and the sync's root in it, synced and committed once."""
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "app.py").write_text("v1\n")
    git(repo, "add", "app.py")
    git(repo, "commit", "-q", "-m", "app")
    (repo / "app.py").write_text("v2, staged\n")
    git(repo, "add", "app.py")
    (repo / "app.py").write_text("v3, not staged\n")
    (repo / ".env").write_text("SECRET=1\n")
    (repo / "notes.txt").write_text("mine\n")
    root = repo / "docs" / "audit"
    first = manage("--root", str(root), "--git-commit")
    assert first.returncode == 0, first.stderr
    return repo, root


def persons_state(root: Path) -> dict[str, str]:
    return {
        "head": git(root, "rev-parse", "HEAD"),
        "index": git(root, "ls-files", "--stage"),
        "staged": git(root, "diff", "--cached"),
        "unstaged": git(root, "diff"),
    }


def test_a_hook_that_stages_a_persons_env_is_refused_and_the_commit_undone(
    tmp_path: Path,
) -> None:
    channel = scenario.build()
    repo, root = persons_project(tmp_path)
    before = persons_state(repo)
    persons_entries = git(repo, "ls-files", "--stage", ".env", "notes.txt", "app.py")
    staging = hook(repo, "git add .env notes.txt")
    scenario.post(channel, 2)

    refused = manage("--root", str(root), "--git-commit")

    assert refused.returncode != 0
    assert "SYNC_GIT_HOOK_STAGED: " in refused.stderr, refused.stderr
    assert ".env" in refused.stderr and "notes.txt" in refused.stderr
    assert refused.stdout.startswith("synced 1 channel(s): ")
    assert persons_state(repo) == before  # no commit, the index entry by entry as it was
    assert git(repo, "ls-files", "--stage", ".env", "notes.txt") == ""
    assert not any(".env" in committed_files(repo, c) for c in commits(repo))
    written = sorted(p.name for p in (root / "review").glob("000[89]-*.md"))
    assert len(written) == 2

    # Without the hook the next sync commits what the refused one wrote, and only that.
    staging.unlink()
    again = manage("--root", str(root), "--git-commit")
    assert again.returncode == 0, again.stderr
    names = committed_files(repo)
    assert sorted(n.rsplit("/", 1)[-1] for n in names if n.endswith(".md"))[:2] == written
    assert all(name.startswith("docs/audit/review/") for name in names), names
    assert git(repo, "ls-files", "--stage", ".env", "notes.txt", "app.py") == persons_entries
    assert git(repo, "diff", "--cached") == before["staged"]
    assert git(repo, "diff") == before["unstaged"]


def test_a_hook_doing_git_add_u_is_refused_and_the_persons_edits_stay_as_they_were(
    tmp_path: Path,
) -> None:
    channel = scenario.build()
    repo, root = persons_project(tmp_path)
    before = persons_state(repo)
    staging = hook(repo, "git add -u")
    scenario.post(channel, 1)

    with pytest.raises(AppError) as raised:
        sync_commit(root)

    assert raised.value.code == "SYNC_GIT_HOOK_STAGED"
    assert "app.py" in raised.value.message
    assert persons_state(repo) == before
    staging.unlink()
    assert sync_commit(root) is not None
    assert [n for n in committed_files(repo) if n.endswith(".md")] == [
        "docs/audit/review/0008-alice-note-0.md"
    ]
    assert "app.py" not in committed_files(repo)
    assert git(repo, "diff", "--cached") == before["staged"]
    assert git(repo, "diff") == before["unstaged"]


def test_a_hook_staging_a_persons_file_in_the_first_commit_leaves_no_commit(
    tmp_path: Path,
) -> None:
    scenario.build()
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".env").write_text("SECRET=1\n")
    hook(repo, "git add .env")
    root = repo / "docs" / "audit"
    root.mkdir(parents=True)
    git_prepare(root)

    with pytest.raises(AppError) as raised:
        sync_commit(root)

    assert raised.value.code == "SYNC_GIT_HOOK_STAGED"
    assert commits_or_none(repo) == []
    assert git(repo, "ls-files", "--stage") == ""
    assert sync_commit(root, verify=False) is not None
    assert ".env" not in committed_files(repo)
    assert git(repo, "status", "--porcelain") == "?? .env\n"


def test_a_hook_that_restages_only_the_syncs_own_paths_is_accepted(tmp_path: Path) -> None:
    channel = scenario.build()
    repo = tmp_path / "project"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "notes.txt").write_text("staged work\n")
    git(repo, "add", "notes.txt")
    # A formatter's hook: what is staged, re-added (the commit's index holds only the sync's).
    hook(repo, "git diff --cached --name-only -z | xargs -0 -r git add --")
    root = repo / "docs" / "audit"
    root.mkdir(parents=True)
    git_prepare(root)
    assert sync_commit(root) is not None
    scenario.post(channel, 1)

    assert sync_commit(root) is not None

    assert len(commits(repo)) == 2
    names = committed_files(repo)
    assert "docs/audit/review/0008-alice-note-0.md" in names
    assert all(name.startswith("docs/audit/review/") for name in names), names
    assert git(repo, "diff", "--cached", "--name-only") == "notes.txt\n"
