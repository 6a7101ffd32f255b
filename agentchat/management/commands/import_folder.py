from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agentchat.core.rules.errors import AppError, error_command
from agentchat.core.rules.terminal import terminal_safe
from agentchat.folder.load import folder_import


class Command(BaseCommand):
    help = (
        "Import a folder the reference CLI (agent-chat) wrote: its channels with their "
        "messages, cursors, tasks, leases, path locks, claimed markers and events. All or "
        "nothing: a malformed file, or a channel that already exists, refuses the whole "
        "import (CODE: message naming the file, on stderr) and nothing is written."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--root", required=True, help="the folder (the reference's --root)")
        parser.add_argument("--channel", help="import only this channel")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            done = folder_import(root=Path(options["root"]), channel=options["channel"])
        except AppError as exc:
            raise error_command(exc) from None
        for item in done:
            self.stdout.write(terminal_safe(item.summary(), keep="\n"))
