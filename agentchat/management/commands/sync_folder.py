from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentchat.core.rules.errors import AppError, error_command
from agentchat.core.rules.terminal import terminal_safe
from agentchat.folder.follow import follow
from agentchat.folder.git import git_commit, git_prepare
from agentchat.folder.sync import SyncReport, folder_sync


class _Bar:
    """A tqdm bar per channel on a terminal; nothing otherwise."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.bar: Any = None

    def start(self, channel: str, total: int) -> None:
        self.close()
        if self.enabled and total > 0:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total, desc=terminal_safe(channel), unit="msg", leave=False, file=sys.stderr
            )

    def advance(self, count: int) -> None:
        if self.bar is not None:
            self.bar.update(count)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise CommandError(f"INVALID_VALUE: expected seconds in (0, 86400], got {text!r}")
    return value


class Command(BaseCommand):
    help = (
        "Mirror the database into DIR as the reference CLI's folder (one channel or all): "
        "deterministic, incremental, each file written atomically. The sync owns DIR."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--root", required=True, type=Path, help="the folder to sync into")
        parser.add_argument("--channel", help="sync only this channel")
        parser.add_argument(
            "--verify", action="store_true", help="read and compare every file (trust nothing)"
        )
        parser.add_argument(
            "--adopt",
            action="store_true",
            help="take over a non-empty folder that no sync made (its other files go)",
        )
        parser.add_argument(
            "--follow", action="store_true", help="keep syncing as the database changes"
        )
        parser.add_argument(
            "--interval",
            type=_positive,
            default=30.0,
            help="with --follow: sync at least this often (seconds; default 30)",
        )
        parser.add_argument(
            "--poll",
            type=_positive,
            default=0.5,
            help="with --follow on SQLite: how often to ask whether it changed (default 0.5)",
        )
        parser.add_argument(
            "--git-commit",
            action="store_true",
            help="DIR is (or becomes) a git repository, or lies in one: commit the files each "
            "sync wrote or removed (only those), when it changed something",
        )
        parser.add_argument(
            "--git-no-verify",
            action="store_true",
            help="with --git-commit: skip the repository's commit hooks (git commit --no-verify)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        root: Path = options["root"]
        bar = _Bar(enabled=self.stdout.isatty())
        first = [True]

        def once() -> SyncReport:
            try:
                report = folder_sync(
                    root=root,
                    channel=options["channel"],
                    verify=options["verify"],
                    adopt=options["adopt"] and first[0],
                    progress=bar,
                )
            finally:
                bar.close()
            first[0] = False
            line = report.summary()
            if options["git_commit"]:
                try:
                    commit = git_commit(root, report, verify=not options["git_no_verify"])
                except AppError:
                    # the files are written: say so, then why no commit
                    self.stdout.write(terminal_safe(line))
                    raise
                if commit:
                    line += f" - committed {commit[:12]}"
            if report.changed or not options["follow"]:
                self.stdout.write(terminal_safe(line))
                self.stdout.flush()
            return report

        try:
            if options["git_commit"]:
                root.mkdir(parents=True, exist_ok=True)
                git_prepare(root)
            if options["follow"]:
                follow(once, poll=options["poll"], interval=options["interval"])
            else:
                once()
        except AppError as exc:
            raise error_command(exc) from exc
        except OSError as exc:
            raise CommandError(f"SYNC_ROOT_INVALID: {terminal_safe(exc)}", returncode=1) from exc
