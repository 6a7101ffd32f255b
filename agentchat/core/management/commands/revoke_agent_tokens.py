from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agentchat.core.identity.services import token_revoke
from agentchat.core.models import Agent, ApiToken
from agentchat.core.rules.errors import AppError, error_command
from agentchat.core.rules.terminal import terminal_safe


class Command(BaseCommand):
    help = "Revoke every active token of agent NAME (or one token, by the hint the admin shows)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--hint", help="revoke only the token starting with this hint")

    def handle(self, *args: Any, **options: Any) -> None:
        agent = Agent.objects.filter(name=options["name"]).first()
        if agent is None:
            raise error_command(AppError("AGENT_NOT_FOUND", f"no agent named {options['name']!r}"))
        tokens = ApiToken.objects.filter(agent=agent, revoked_at__isnull=True)
        if options["hint"]:
            tokens = tokens.filter(hint__startswith=options["hint"])
        count = 0
        for token in tokens:
            token_revoke(token=token)
            count += 1
        self.stdout.write(terminal_safe(f"revoked {count} token(s) of {agent.name}"))
