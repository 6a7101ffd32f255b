from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agentchat.core.identity.services import agent_get_or_create, token_create
from agentchat.core.rules.errors import AppError, error_command


class Command(BaseCommand):
    help = (
        "Create agent NAME if it does not exist and print a new API token for it. The token is "
        "the only line on stdout and is shown once: only its hash is stored."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="agent name: 1-64 of a-z 0-9 . _ -")
        parser.add_argument("--label", default="", help="a note to recognise the token by")
        parser.add_argument("--human", action="store_true", help="the agent is a person")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            agent = agent_get_or_create(
                name=options["name"], kind="human" if options["human"] else "agent"
            )
            raw = token_create(agent=agent, label=options["label"])
        except AppError as exc:
            raise error_command(exc) from None
        self.stdout.write(raw)
