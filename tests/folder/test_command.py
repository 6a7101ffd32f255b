"""``manage.py sync_folder`` as a process: its summary and errors, a crash in the middle of a
sync (old or new files, never torn ones), ``--git-commit``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from agentchat.core.rules.parsed import Parsed
from agentchat.folder.files import TEMP_SUFFIX
from agentchat.folder.sync import folder_sync
from tasks_app.services.tasks import task_update
from tests.conftest import ROOT, database_url
from tests.folder import scenario
from tests.folder.test_git import manage as manage_in_process

pytestmark = pytest.mark.django_db(transaction=True)

# Killed (SIGKILL) halfway through the k-th file it writes: what a crash leaves.
CRASHING_SYNC = r"""
import os, signal, sys
from pathlib import Path
import django
django.setup()
from agentchat.folder.sync import folder_sync
real_write, left = os.write, [int(sys.argv[2])]
def write(fd, data):
    left[0] -= 1
    if left[0] == 0:
        real_write(fd, bytes(data[: len(data) // 2]))
        os.kill(os.getpid(), signal.SIGKILL)
    return real_write(fd, data)
os.write = write
folder_sync(root=Path(sys.argv[1]))
"""


def env() -> dict[str, str]:
    return {
        **os.environ,
        "DATABASE_URL": database_url(),
        "SECRET_KEY": settings.SECRET_KEY,
        "DJANGO_SETTINGS_MODULE": "agentchat.settings",
    }


def manage(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "sync_folder", *args],
        cwd=cwd,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_the_command_prints_a_summary_and_no_progress_bar_off_a_terminal(tmp_path: Path) -> None:
    scenario.build()
    first = manage("--root", str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert first.stdout == (
        "synced 1 channel(s): 16 file(s) written, 0 removed - review: 16 written, 0 removed\n"
    )
    assert first.stderr == ""  # no bar: stdout is no terminal
    again = manage("--root", str(tmp_path))
    assert again.stdout == "synced 1 channel(s): 0 file(s) written, 0 removed\n"


def test_command_errors_name_the_root_and_exit_non_zero(tmp_path: Path) -> None:
    scenario.build()
    (tmp_path / "precious.txt").write_text("x")
    foreign = manage("--root", str(tmp_path))
    assert foreign.returncode == 1
    assert foreign.stderr.startswith("CommandError: SYNC_ROOT_FOREIGN: ")
    assert str(tmp_path) in foreign.stderr
    assert "Traceback" not in foreign.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.txt"]
    missing = manage("--root", str(tmp_path / "new"), "--channel", "nope")
    assert missing.returncode == 1
    assert "CHANNEL_NOT_FOUND" in missing.stderr and "Traceback" not in missing.stderr
    bad = manage("--root", str(tmp_path / "new"), "--follow", "--interval", "-1")
    assert bad.returncode != 0 and "INVALID_VALUE" in bad.stderr


@pytest.mark.parametrize("crash_at", [1, 4, 7])
def test_a_crash_mid_sync_leaves_old_or_new_files_never_torn_ones(
    tmp_path: Path, crash_at: int
) -> None:
    channel = scenario.build()
    root = tmp_path / "root"
    folder_sync(root=root)
    old = scenario.tree(root)
    scenario.post(channel, 5)
    task_update(
        channel=channel, task_id="T-2", actor="alice", changes={"title": Parsed.ok("renamed")}
    )
    folder_sync(root=tmp_path / "new")
    new = scenario.tree(tmp_path / "new")

    crashed = subprocess.run(
        [sys.executable, "-c", CRASHING_SYNC, str(root), str(crash_at)],
        cwd=ROOT,
        env=env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert crashed.returncode == -9, crashed.stderr
    after = scenario.tree(root)
    temps = [name for name in after if Path(name).name.endswith(TEMP_SUFFIX)]
    assert len(temps) == 1  # the torn one, hidden from every reader
    assert all(Path(name).name.startswith(".") for name in temps)
    visible = {name: data for name, data in after.items() if name not in temps}
    for name, data in visible.items():
        assert data in (old.get(name), new.get(name)), name
    assert visible != new  # it did crash before the end

    folder_sync(root=root)
    assert scenario.tree(root) == new


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, check=True
    ).stdout


def test_git_commit_commits_each_sync_that_changed_something(tmp_path: Path) -> None:
    # The process itself is the other tests' subject: the commits run in-process here.
    channel = scenario.build()
    root = tmp_path / "audit"
    first = manage_in_process("--root", str(root), "--git-commit")
    assert first.returncode == 0, first.stderr
    assert "committed" in first.stdout
    assert git(root, "log", "--format=%s").splitlines() == [
        "sync review: new channel; messages #1..#7 (7); tasks T-1, T-2; claims T-1; "
        f"locks {scenario.lock_ids(channel)[0]}; cursors bob; "
        ".path-locks.lock, _fences.json, _meta.json, _tasks.lock"
    ]
    assert ".agentchat-sync" not in git(root, "ls-files")
    assert git(root, "status", "--porcelain") == ""

    unchanged = manage_in_process("--root", str(root), "--git-commit")
    assert unchanged.returncode == 0 and "committed" not in unchanged.stdout
    assert len(git(root, "log", "--format=%H").splitlines()) == 1

    scenario.post(channel, 3)
    task_update(
        channel=channel, task_id="T-2", actor="alice", changes={"title": Parsed.ok("renamed")}
    )
    manage_in_process("--root", str(root), "--git-commit")
    log = git(root, "log", "--format=%s").splitlines()
    assert log[0] == "sync review: messages #8..#11 (4); tasks T-2"
    assert git(root, "show", "--stat", "--format=", "HEAD").count("review/") == 5
