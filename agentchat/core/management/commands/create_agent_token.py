from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from agentchat.core.identity.services import agent_get_or_create, token_create
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError, error_command


class Command(BaseCommand):
    help = (
        "Create agent NAME if it does not exist and print a new API token for it. The token is "
        "the only line on stdout and is shown once: only its hash is stored. An existing agent "
        "of the other kind (--human for a person) is refused."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="agent name: 1-64 of a-z 0-9 . _ -")
        parser.add_argument("--label", default="", help="a note to recognise the token by")
        parser.add_argument("--human", action="store_true", help="the agent is a person")

    def handle(self, *args: Any, **options: Any) -> None:
        kind = Agent.Kind.HUMAN if options["human"] else Agent.Kind.AGENT
        try:
            agent = agent_get_or_create(name=options["name"], kind=kind)
            if agent.kind != kind:
                # An existing agent keeps its kind: a token asked for a person must not act as
                # an agent-kind agent (or the reverse), whose messages read differently.
                raise AppError(
                    "INVALID_VALUE",
                    f"agent {agent.name!r} exists as kind {agent.kind!r}, not {kind!r}: "
                    + ("drop --human" if options["human"] else "add --human"),
                    detail={"field": "kind", "kind": agent.kind},
                )
            raw = token_create(agent=agent, label=options["label"])
        except AppError as exc:
            raise error_command(exc) from None
        self.stdout.write(raw)
