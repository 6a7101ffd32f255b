"""The subcommands ``mcp``, ``hook`` and ``guard`` of the ``agentchat`` CLI.

The CLI (``agentchat.client.cli``) calls ``register(subparsers)`` once; each parser it adds
carries ``run`` (``set_defaults``): a function of the parsed namespace returning the exit
status. The modules behind them are imported only when their command runs, so the CLI's other
commands do not pay for the MCP SDK.
"""

from __future__ import annotations

import argparse
from typing import Any

from agentchat.client.config import connection_arguments


def _mcp(options: argparse.Namespace) -> int:
    from agentchat.client import mcp_server

    return mcp_server.run(
        url=getattr(options, "url", None),
        token=getattr(options, "token", None),
        call_timeout=getattr(options, "call_timeout", None),  # `agentchat --call-timeout`
    )


def _hook(options: argparse.Namespace) -> int:
    from agentchat.client import hooks

    return hooks.run_parsed(options)


def _guard(options: argparse.Namespace) -> int:
    from agentchat.client import guard

    return guard.run_parsed(options)


def register(subparsers: Any) -> None:
    """Add ``mcp``, ``hook`` and ``guard`` to the CLI's subparsers (``run`` set on each)."""
    from agentchat.client import guard, hooks

    mcp = subparsers.add_parser("mcp", help="serve the MCP tools and resources on stdio")
    connection_arguments(mcp)
    mcp.set_defaults(run=_mcp)

    hook = subparsers.add_parser(
        "hook", help="print unread counts for a host's session-start, prompt or stop hook"
    )
    hooks.add_arguments(hook)
    hook.set_defaults(run=_hook)

    guard_parser = subparsers.add_parser(
        "guard", help="a git pre-commit hook honouring other agents' path locks"
    )
    guard.add_arguments(guard_parser)
    guard_parser.set_defaults(run=_guard)
