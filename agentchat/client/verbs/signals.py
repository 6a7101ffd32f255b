"""The EP-0118 verbs (the Inter-Agent Signal Protocol's §6), by the EP's names and flags:
``list-agents``, ``signal``, ``read-signals``, ``ack-signals``, ``read-notes``,
``whiteboard-write``, ``whiteboard-read``, ``tired`` (and ``start-session``, the EP's
registration, which its CLI list leaves out).

Each resolves its agent and session as ``agentchat.client.iasp`` says (``--agent-id``, then the
environment, then the config file, then the registry's one active agent under the token;
``AMBIGUOUS_IDENTITY``, exit 4, rather than a guess), acts as that agent through
``AgentChat-As`` (``--agent-id alice.critic`` with alice's token), and makes one REST call or a
bounded run of them: none blocks. ``--json`` prints the server's body (a paged list: its
items in one body with ``"more"``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from agentchat.client import iasp, text
from agentchat.client.api import Client
from agentchat.client.config import config_load
from agentchat.client.errors import ClientError
from agentchat.client.safe import line
from agentchat.client.verbs import Command, dump, out

Register = Callable[..., argparse.ArgumentParser]


def _file(args: argparse.Namespace) -> Any:
    """The config file's table (read once per command: main has read it already)."""
    if not hasattr(args, "config_file"):
        config = config_load(url=args.url, token=args.token, call_timeout=args.call_timeout)
        args.config_file = config.file
    return args.config_file


def _session(args: argparse.Namespace, *, required: bool = True) -> str | None:
    session = iasp.session_declared(args.session_id, file=_file(args))
    return iasp.session_required(session) if required else session


def _as(client: Client, args: argparse.Namespace, session: str | None) -> Client:
    """The client acting as the agent the call is (``--agent-id``, env, config, registry)."""
    agent = iasp.agent_declared(args.agent_id, file=_file(args))
    if agent is None:
        agent = iasp.agent_guess(client, session)
    return iasp.acting(client, agent)


def cmd_list_agents(client: Client, args: argparse.Namespace) -> None:
    listing = iasp.agents_list(client, _session(args, required=False))
    if args.json:
        return dump(listing)
    if not listing["agents"]:
        return out("(no agents)\n")
    out(f"{'AGENT':<40} {'STATUS':<9} {'LAST SEEN':<33} HARNESS\n")
    for entry in listing["agents"]:
        status, seen, harness = (
            line(str(entry.get(key) or "-")) for key in ("status", "last_seen", "harness")
        )
        out(f"{line(entry['agent']):<40} {status:<9} {seen:<33} {harness}\n")


def cmd_signal(client: Client, args: argparse.Namespace) -> None:
    session = _session(args)
    assert session is not None
    sent = iasp.signal(
        _as(client, args, session), session, to=args.to, content=args.content, kind=args.type
    )
    if args.json:
        return dump(sent)
    out(f"signaled #{sent['seq']} {line(sent['id'])} -> {line(sent['to'])} ")
    out(f"[{line(sent['type'])}]\n")


def cmd_read_signals(client: Client, args: argparse.Namespace) -> None:
    session = _session(args)
    assert session is not None
    listing = iasp.signals_read(_as(client, args, session), session, unread_only=not args.all)
    if args.json:
        return dump(listing)
    for item in listing["signals"]:
        read = "" if item.get("read_at") is None else " (read)"
        first = str(item.get("content", "")).split("\n", 1)[0]
        out(
            f"#{item.get('seq')} {line(str(item.get('id')))} {line(str(item.get('from')))} -> "
            f"{line(str(item.get('to')))} [{line(str(item.get('type')))}]{read} {line(first)}\n"
        )
    if not listing["signals"]:
        out("(no unread signals)\n" if not args.all else "(no signals)\n")


def cmd_ack_signals(client: Client, args: argparse.Namespace) -> None:
    ids = [part.strip() for part in args.ids.split(",") if part.strip()]
    if not ids:
        raise ClientError("USAGE", "ack-signals: give the signals' ids, comma-separated")
    session = _session(args)
    assert session is not None
    answer = iasp.signals_ack(_as(client, args, session), session, ids)
    if args.json:
        return dump(answer)
    out(f"acked {len(answer['acked'])} (already read {len(answer['already_read'])})\n")


def cmd_read_notes(client: Client, args: argparse.Namespace) -> None:
    if not 1 <= args.limit <= iasp.NOTES_MAX:
        raise ClientError("USAGE", f"--limit must be 1 to {iasp.NOTES_MAX}")
    session = _session(args)
    assert session is not None
    page = iasp.notes_read(client, session, args.limit)
    if args.json:
        return dump(page)
    for message in page["messages"]:
        out(text.message_block(message))
    if not page["messages"]:
        out(f"(session '{line(session)}' has no notes)\n")


def cmd_whiteboard_write(client: Client, args: argparse.Namespace) -> None:
    session = _session(args)
    assert session is not None
    entry = iasp.whiteboard_write(_as(client, args, session), session, args.key, args.value)
    if args.json:
        return dump(entry)
    out(f"wrote {line(entry['key'])} by {line(entry['updated_by'])}\n")


def cmd_whiteboard_read(client: Client, args: argparse.Namespace) -> None:
    session = _session(args)
    assert session is not None
    entry = iasp.whiteboard_read(client, session, args.key)
    if args.json:
        return dump(entry)
    value = entry["value"]
    out((value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)) + "\n")


def cmd_tired(client: Client, args: argparse.Namespace) -> None:
    session = _session(args, required=False)
    agent = iasp.agent_declared(args.agent_id, file=_file(args))
    if agent is None:
        agent = iasp.agent_guess(client, session)
    answer = iasp.tired(iasp.acting(client, agent), agent=agent, note=args.note)
    if args.json:
        return dump(answer)
    if answer["last"]:
        return out(f"{line(answer['agent'])} is idle: the last one out\n")
    out(f"{line(answer['agent'])} is idle; {answer['others_active']} other(s) still active\n")


def cmd_start_session(client: Client, args: argparse.Namespace) -> None:
    session = _session(args, required=False)
    agent = iasp.agent_declared(args.agent_id, file=_file(args))
    answer = iasp.register(
        client,
        harness=args.harness,
        session=session,
        agent=agent,
        substrate=args.substrate,
        conversation_id=args.conversation_id,
        run_token=args.run_token,
    )
    if args.json:
        return dump(answer)
    out(f"registered {line(answer['agent'])} [{line(str(answer.get('status')))}]\n")
    if answer.get("run_token"):
        out(f"run_token {line(answer['run_token'])}\n")


def _context(p: argparse.ArgumentParser, *, agent: bool = True) -> None:
    if agent:
        p.add_argument(
            "--agent-id",
            help="the agent you are: the token's or a sub-agent under it (default: "
            "$AGENT_CHAT_AGENT_ID / $TUR_AGENT_ID, agent_id in the config, the registry)",
        )
    p.add_argument(
        "--session-id",
        help="the session's channel (default: $AGENT_CHAT_SESSION_ID / "
        "$TUR_ACTIVE_SESSION_ID, channel in the config)",
    )
    if not agent:
        p.set_defaults(agent_id=None)


def register(command: Register) -> None:
    """Add the EP-0118 verbs through the CLI's ``command(name, func, help)``."""
    verbs: dict[str, Command] = {}

    def verb(name: str, func: Command, help_text: str, *, agent: bool = True) -> Any:
        verbs[name] = func
        p = command(name, func, help_text)
        _context(p, agent=agent)
        return p

    verb("list-agents", cmd_list_agents, "EP-0118: list the registered agents", agent=False)

    p = verb("signal", cmd_signal, "EP-0118: send a typed signal to an agent, a namespace or *")
    p.add_argument("to", help="an agent id (a sub-agent's dotted id among them) or *")
    p.add_argument("content", help="the signal's text")
    p.add_argument("--type", default="inform", choices=iasp.SIGNAL_TYPES, help="default inform")

    p = verb("read-signals", cmd_read_signals, "EP-0118: your signals (changes nothing)")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--unread-only", action="store_true", help="the default")
    which.add_argument("--all", action="store_true", help="read ones too, with read_at")

    p = verb("ack-signals", cmd_ack_signals, "EP-0118: mark these signals read, for you only")
    p.add_argument("ids", metavar="signal_id_list", help="comma-separated signal ids")

    p = verb("read-notes", cmd_read_notes, "EP-0118: the session's last notes", agent=False)
    p.add_argument("--limit", type=int, default=iasp.NOTES_DEFAULT, help="default 50")

    p = verb("whiteboard-write", cmd_whiteboard_write, "EP-0118: set a whiteboard key")
    p.add_argument("key")
    p.add_argument("value", help="stored as a JSON string")

    p = verb("whiteboard-read", cmd_whiteboard_read, "EP-0118: read a whiteboard key", agent=False)
    p.add_argument("key")

    p = verb("tired", cmd_tired, "EP-0118: go idle, and learn whether you are the last one out")
    p.add_argument("--note", help="what you leave said (shown in the registry)")

    p = verb("start-session", cmd_start_session, "EP-0118: register this session as an agent")
    p.add_argument("--harness", required=True, help="what runs you (claude-code, codex…)")
    p.add_argument("--substrate", help="the model")
    p.add_argument("--conversation-id", help="the harness's conversation id (names a new id)")
    p.add_argument("--run-token", help="your run token, to reclaim a registration")
