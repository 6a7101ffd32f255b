"""``agentchat``: the reference CLI's commands over HTTP (REFERENCE-CLI §2 and §5).

``agentchat [--url URL] [--token TOKEN] [--call-timeout SECONDS] [--json] COMMAND ...`` (these
flags may also follow the command). The commands,
arguments, flags and output lines are the reference's; the folder is replaced by a server
(``--url``, see ``agentchat.client.config``) and the identity by the token. The identity flags
(``--as``, ``--from``, ``--created-by``, ``--owner`` where it names the actor) are optional and
default to the token's agent; one naming another agent is refused with ``SENDER_MISMATCH``
(exit 1) and nothing is done: ``post`` sends it as ``from`` and ``task create`` as
``created_by`` (the server refuses them), every other command compares it with
``GET /api/v1/me/`` first.

This module parses and dispatches; the commands are in ``agentchat.client.verbs`` (one module
per family), and everything they print is terminal-safe (``agentchat.client.safe``).

Exit status: 0 success; 1 plain errors (no server, a call past its deadline, an answer of the
wrong shape, AUTH_*, CHANNEL_*, SENDER_MISMATCH, PATH_LOCK_*, STATE_*); 2 usage errors,
TASK_*, LEASE_*, EVENT_* and a wait that timed out; 3 a lost marker claim; 5 ``fence check``
of a fence that is not current; 130 Ctrl-C. Errors
are one stderr line, ``agentchat: CODE: message``. ``--json`` prints the REST body as the server
sent it (a list that takes several pages: its items in one body; what a terminal would act on
JSON-escaped, the same JSON).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from agentchat.client import extra_commands
from agentchat.client.api import Client
from agentchat.client.config import config_load
from agentchat.client.errors import EXIT_INTERRUPTED, EXIT_USAGE, ClientError
from agentchat.client.verbs import (
    Command,
    direct,
    fence,
    inbox,
    locks,
    messages,
    signals,
    state,
    tasks,
)

EVENT_TYPES = ("capability", "status")
EVENT_STATUSES = ("ready", "busy", "idle", "blocked", "stopped")


# --- the parser -----------------------------------------------------------------------------


class _TaskParser(argparse.ArgumentParser):
    """Inside ``task``, argument errors are TASK_INVALID_COMMAND / TASK_INVALID_ARGUMENT (exit
    2), as in the reference."""

    def error(self, message: str) -> NoReturn:
        lower = message.lower()
        unknown = ("invalid choice", "unknown subcommand", "unrecognized arguments")
        code = (
            "TASK_INVALID_COMMAND" if any(k in lower for k in unknown) else "TASK_INVALID_ARGUMENT"
        )
        raise ClientError(code, f"cli error: {message}")


def _global_flags(parser: argparse.ArgumentParser, *, leaf: bool = False) -> None:
    """The flags every command takes, before the command or after it: on a command's own
    parser their default is SUPPRESS, so one given before the command is not reset by it."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if leaf else value

    parser.add_argument(
        "--url", default=default(None), help="server root (default: $AGENT_CHAT_URL, config, :8000)"
    )
    parser.add_argument(
        "--token", default=default(None), help="agent token (default: $AGENT_CHAT_TOKEN, config)"
    )
    parser.add_argument(
        "--call-timeout",
        type=float,
        default=default(None),
        help="seconds one call to the server may take in all (default: "
        "$AGENT_CHAT_CALL_TIMEOUT, config, 30); past it: SERVER_TIMEOUT",
    )
    parser.add_argument(
        "--json", action="store_true", default=default(False), help="print the REST body"
    )


def _json_flag(parser: argparse.ArgumentParser) -> None:
    _global_flags(parser, leaf=True)


def _lease_flag(parser: argparse.ArgumentParser, what: str = "lease") -> None:
    parser.add_argument(
        "--lease-seconds",
        "--lease",
        "--ttl",
        dest="lease_seconds",
        type=float,
        default=300.0,
        help=f"duration of the {what} in seconds (default 300)",
    )


def _fence_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fence",
        type=fence.fence_value,
        default=None,
        help="the fence you hold: refused (STALE_FENCE) when it is no longer current",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentchat",
        description="AgentChat client: the reference agent-chat CLI's commands, on a server",
    )
    _global_flags(parser)
    sub = parser.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def command(name: str, func: Command, help_text: str, **kw: Any) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_text, **kw)
        p.set_defaults(func=func)
        _json_flag(p)
        return p

    def channel_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("channel", help="channel name")

    p = command("init", messages.cmd_init, "create a channel")
    channel_arg(p)
    p.add_argument("--members", help="comma-separated agent names")
    p.add_argument("--topic", help="initial topic")
    p.add_argument("--visibility", choices=("open", "members"), help="default open")

    command("channels", messages.cmd_channels, "list channels")

    p = command("roster", messages.cmd_roster, "show a channel's members")
    channel_arg(p)

    p = command("post", messages.cmd_post, "post a message (body: --body, --body-file, or stdin)")
    channel_arg(p)
    p.add_argument("--from", dest="sender", help="sender (default: the token's agent)")
    p.add_argument("--to", help="recipient(s), comma-separated, or 'all' (default all)")
    p.add_argument("--title", required=True, help="message title")
    p.add_argument("--reply", type=int, help="seq this replies to")
    p.add_argument("--status", default="discussion", help="message status (default discussion)")
    p.add_argument("--body", help="literal message body")
    p.add_argument("--body-file", help="read the body from a file ('-': stdin)")

    p = command("read", messages.cmd_read, "print new messages for an agent (advances the cursor)")
    channel_arg(p)
    p.add_argument("--as", dest="agent", help="agent (default: the token's)")
    p.add_argument("--all", action="store_true", help="whole thread, ignoring relevance")
    p.add_argument("--peek", action="store_true", help="do not move the cursor")

    p = command("wait", messages.cmd_wait, "block until a relevant message arrives (no polling)")
    channel_arg(p)
    p.add_argument("--as", dest="agent", help="agent (default: the token's)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds (default 900)")
    p.add_argument("--interval", type=float, default=5.0, help="accepted and ignored")

    p = command("peek", messages.cmd_peek, "show the last N messages (cursor untouched)")
    channel_arg(p)
    p.add_argument("-n", type=int, default=3, help="number of messages (default 3)")

    p = command("claim", messages.cmd_claim, "claim a task-<id>.md marker (lost: exit 3)")
    channel_arg(p)
    p.add_argument("task", help="marker name, e.g. task-12.md")
    p.add_argument("--as", dest="agent", help="agent (default: the token's)")

    as_names = ("--as", "--from", "--owner")

    def lock_verb(
        name: str,
        func: Command,
        help_text: str,
        what: str,
        owner_help: str = "agent (default: the token's)",
        **how: Any,
    ) -> argparse.ArgumentParser:
        """A lock verb's parser: the channel, what it acts on, and the owner it acts as."""
        p = command(name, func, help_text)
        channel_arg(p)
        p.add_argument(what, **how)
        p.add_argument(*as_names, dest="owner", help=owner_help)
        return p

    target = "lock id or exact normalized path"
    what = "lock workspace-relative paths"
    _lease_flag(lock_verb("lock", locks.cmd_lock, what, "paths", nargs="+", help="paths or globs"))
    what = "check paths for lock conflicts (exit 0 either way)"
    lock_verb("check", locks.cmd_check, what, "paths", "agent (checked only)", nargs="+")
    _fence_flag(
        lock_verb("unlock", locks.cmd_unlock, "release a lock you own", "target", help=target)
    )
    p = lock_verb(
        "recover", locks.cmd_recover, "recover an expired path lock", "target", help=target
    )
    p.add_argument("--reason", required=True)
    _lease_flag(p, "new lock")

    p = command("recover-pending", locks.cmd_recover_pending, "nothing is ever pending on a server")
    channel_arg(p)
    p.add_argument(*as_names, dest="actor")
    p.add_argument("--resolve-publication", choices=("rollback", "published"))

    for name, func, help_text in (
        ("state", state.cmd_state, "print the channel's state summary"),
        ("compact", state.cmd_compact, "store the state summary and audit it"),
    ):
        p = command(name, func, help_text)
        channel_arg(p)
        p.add_argument("--as", "--from", "--actor", dest="actor")
        p.add_argument("--strict", action="store_true", help="fail on a malformed source")
        p.add_argument("--no-audit", action="store_true", help="refused: a server always audits")
        if name == "state":
            p.add_argument("--write", "--save", action="store_true", help="compact")

    event = sub.add_parser("event", help="post/read capability and status events")
    event_sub = event.add_subparsers(dest="event_cmd", required=True, metavar="COMMAND")
    p = event_sub.add_parser("post", help="post a capability or status event")
    p.set_defaults(func=state.cmd_event_post)
    _json_flag(p)
    channel_arg(p)
    p.add_argument("--from", dest="sender", help="agent (default: the token's)")
    p.add_argument("--type", dest="event_type", choices=EVENT_TYPES, required=True)
    p.add_argument("--harness", required=True)
    p.add_argument("--status", choices=EVENT_STATUSES)
    p.add_argument("--detail")
    p.add_argument("--primitives", action="append", help="repeatable, comma-separated")
    p = event_sub.add_parser("read", help="print the channel's events, one JSON per line")
    p.set_defaults(func=state.cmd_event_read)
    _json_flag(p)
    channel_arg(p)
    p.add_argument("--type", dest="event_type", choices=EVENT_TYPES)

    _task_parsers(sub)
    inbox.register(command)  # HTTP v1: inbox, monitor
    direct.register(sub, _json_flag)  # send, receipt, contacts: HTTP v1 direct messages
    fence.register(sub, _json_flag)  # fence check: is a fence still current
    signals.register(command)  # the EP-0118 verbs (list-agents, signal, read-signals, …)
    # mcp, hook and guard: their own modules, loaded only when they run (options.run).
    extra_commands.register(sub)
    return parser


def _task_parsers(sub: Any) -> None:
    task = sub.add_parser("task", help="structured tasks under leases")
    task.error = _TaskParser.error.__get__(task)
    tsub = task.add_subparsers(
        dest="task_cmd", required=True, metavar="COMMAND", parser_class=_TaskParser
    )

    def command(name: str, func: Command, help_text: str) -> argparse.ArgumentParser:
        p: argparse.ArgumentParser = tsub.add_parser(name, help=help_text)
        p.set_defaults(func=func)
        _json_flag(p)
        p.add_argument("channel", help="channel name")
        if name not in ("list", "recover-pending"):
            p.add_argument("task_id", help="task id")
        return p

    def actor(p: argparse.ArgumentParser) -> None:
        p.add_argument("--as", "--from", dest="actor", help="agent (default: the token's)")

    p = command("create", tasks.cmd_task_create, "create an open task")
    p.add_argument("--from", "--created-by", dest="creator", help="default: the token's agent")
    p.add_argument("--title", required=True)
    p.add_argument("--owner", help="the agent the task is assigned to")
    for flag in ("--depends-on", "--files-hint", "--acceptance"):
        p.add_argument(flag, action="append", default=[], help="repeatable, comma-separated")
    p.add_argument("--branch")

    p = command("list", tasks.cmd_task_list, "list tasks")
    p.add_argument("--status", help="only this status")
    p.add_argument("--owner", help="only this owner")

    command("show", tasks.cmd_task_show, "show one task")

    p = command("update", tasks.cmd_task_update, "update task fields")
    actor(p)
    p.add_argument("--title", default=argparse.SUPPRESS)
    p.add_argument("--owner", default=argparse.SUPPRESS)
    p.add_argument("--clear-owner", action="store_true")
    for flag in ("--depends-on", "--files-hint", "--acceptance"):
        p.add_argument(flag, action="append", default=argparse.SUPPRESS, help="replaces the list")
    p.add_argument("--branch", default=argparse.SUPPRESS)
    p.add_argument("--clear-branch", action="store_true")
    p.add_argument("--status", default=argparse.SUPPRESS)

    for name, verb, lease, reason in (
        ("claim", "claimed", True, False),
        ("renew", "renewed", True, False),
        ("done", "done", False, False),
        ("block", "blocked", False, False),
        ("release", "released", False, False),
        ("recover", "recovered", True, True),
    ):
        p = command(
            name, tasks._task_action(name, verb, lease=lease, reason=reason), f"{name} a task"
        )
        actor(p)
        if lease:
            _lease_flag(p)
        if reason:
            p.add_argument("--reason", required=True)
        if name in ("renew", "done", "release"):
            _fence_flag(p)

    p = command("recover-pending", tasks.cmd_task_recover_pending, "nothing is ever pending")
    actor(p)
    p.add_argument("--resolve-publication", choices=("rollback", "published"))


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; returns its exit status (the console script exits with it)."""
    try:
        try:
            args = build_parser().parse_args(argv)
        except SystemExit as exc:  # argparse printed the usage and its error
            return exc.code if isinstance(exc.code, int) else EXIT_USAGE
        if hasattr(args, "run"):  # mcp, hook, guard: they read their configuration themselves
            status: int = args.run(args)
            return status
        config = config_load(url=args.url, token=args.token, call_timeout=args.call_timeout)
        with Client.from_config(config) as client:
            return args.func(client, args) or 0
    except ClientError as error:
        sys.stdout.flush()
        print(error.line(), file=sys.stderr)
        return error.exit_code
    except KeyboardInterrupt:
        print(file=sys.stderr)
        print("agentchat: cancelled by user", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 1


if __name__ == "__main__":
    sys.exit(main())
