"""The MCP tools of EP-0118 (the Inter-Agent Signal Protocol, its §5), by the EP's names."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentchat.client import iasp
from agentchat.client.api import Client
from agentchat.client.config import config_load
from agentchat.client.errors import ClientError
from agentchat.client.mcp_schema import Tool
from agentchat.client.mcp_schema import object_schema as _obj
from agentchat.client.mcp_schema import string_schema as _str

# --- EP-0118 (the Inter-Agent Signal Protocol, its §5): the EP's tools by its names ----------
# The session is a channel (`session_id`, else the one start_session named, else
# $AGENT_CHAT_SESSION_ID / $TUR_ACTIVE_SESSION_ID, else the config file's `channel`); the agent
# id is the acting agent (`agent_id` / `sender_id`, else start_session's, else
# $AGENT_CHAT_AGENT_ID / $TUR_AGENT_ID or the config's `agent_id`, else the token's agent),
# sent as AgentChat-As. agentchat.client.iasp resolves and calls; docs/mcp.md, docs/signals.md.


@dataclass
class EpContext:
    """What start_session declared for this MCP server's client, and the config file."""

    file: dict[str, Any]
    agent: str | None = None
    session: str | None = None
    run_token: str | None = None


_EP: weakref.WeakKeyDictionary[Client, EpContext] = weakref.WeakKeyDictionary()
_EP_LOCK = threading.Lock()


def _ep(client: Client) -> EpContext:
    with _EP_LOCK:
        context = _EP.get(client)
        if context is None:
            try:
                file = dict(config_load().file)
            except ClientError:
                file = {}
            context = _EP[client] = EpContext(file=file)
        return context


def _ep_session_named(client: Client, args: dict[str, Any]) -> str | None:
    """The session this call names (``session_id``, else start_session's, else the
    environment's or the config file's), None when there is none."""
    context = _ep(client)
    return iasp.session_declared(args.get("session_id") or context.session, file=context.file)


def _ep_session(client: Client, args: dict[str, Any]) -> str:
    """The session this call names; a ClientError when there is none."""
    return iasp.session_required(_ep_session_named(client, args))


def _ep_agent(client: Client, given: str | None) -> str | None:
    context = _ep(client)
    return iasp.agent_declared(given or context.agent, file=context.file)


def _ep_run(client: Client, agent: str | None, call: Callable[[Client], Any]) -> Any:
    """``call`` with a client acting as ``agent`` (closed after, when it is a new one)."""
    as_agent = iasp.acting(client, agent)
    try:
        return call(as_agent)
    finally:
        if as_agent is not client:
            as_agent.close()


def _ep_act(
    client: Client,
    args: dict[str, Any],
    call: Callable[[Client, str], Any],
    *,
    agent_key: str = "agent_id",
) -> Any:
    """``call(acting, session)`` in the session this call names, with a client acting as the
    agent ``args[agent_key]`` names (else start_session's, the environment's, the config's)."""
    session = _ep_session(client, args)
    return _ep_run(client, _ep_agent(client, args.get(agent_key)), lambda c: call(c, session))


def ep_start_session(client: Client, args: dict[str, Any]) -> Any:
    context = _ep(client)
    session = _ep_session_named(client, args)
    agent = iasp.agent_declared(args.get("agent_id"), file=context.file)
    run_token = args.get("run_token") or (context.run_token if agent == context.agent else None)
    answer = iasp.register(
        client,
        harness=args.get("harness") or "mcp",
        session=session,
        agent=agent,
        substrate=args.get("substrate"),
        conversation_id=args.get("harness_conversation_id"),
        run_token=run_token,
    )
    with _EP_LOCK:
        # The server answers a run token only when it made one; else it is the one sent.
        context.run_token = answer.get("run_token") or run_token
        context.agent, context.session = answer["agent"], session
    return answer


def ep_signal(client: Client, args: dict[str, Any]) -> Any:
    return _ep_act(
        client,
        args,
        lambda c, session: iasp.signal(
            c, session, to=args["to"], content=args["content"], kind=args.get("type", "inform")
        ),
        agent_key="sender_id",
    )


def ep_read_signals(client: Client, args: dict[str, Any]) -> Any:
    unread_only = bool(args.get("unread_only", True))
    return _ep_act(
        client, args, lambda c, session: iasp.signals_read(c, session, unread_only=unread_only)
    )


def ep_ack_signals(client: Client, args: dict[str, Any]) -> Any:
    return _ep_act(
        client, args, lambda c, session: iasp.signals_ack(c, session, list(args["signal_ids"]))
    )


def ep_list_agents(client: Client, args: dict[str, Any]) -> Any:
    return iasp.agents_list(client, _ep_session_named(client, args))


def ep_write_whiteboard(client: Client, args: dict[str, Any]) -> Any:
    return _ep_act(
        client,
        args,
        lambda c, session: iasp.whiteboard_write(c, session, args["key"], args["value"]),
    )


def ep_read_whiteboard(client: Client, args: dict[str, Any]) -> Any:
    return iasp.whiteboard_read(client, _ep_session(client, args), args["key"])


def ep_tired(client: Client, args: dict[str, Any]) -> Any:
    context = _ep(client)
    agent = _ep_agent(client, args.get("agent_id"))
    run_token = context.run_token if agent is not None and agent == context.agent else None
    return _ep_run(
        client,
        agent,
        lambda c: iasp.tired(c, agent=agent, note=args.get("note"), run_token=run_token),
    )


def ep_read_notes(client: Client, args: dict[str, Any]) -> Any:
    session = _ep_session(client, args)
    return iasp.notes_read(client, session, int(args.get("limit", iasp.NOTES_DEFAULT)))


EP_SESSION = _str(
    "the EP's session: a channel (default: start_session's, $AGENT_CHAT_SESSION_ID, the "
    "config file's channel)",
    pattern=f"^{iasp.CHANNEL_NAME.pattern}$",
)
EP_AGENT = _str(
    "the agent you act as: the token's or a sub-agent under it, `alice.critic` (default: "
    "start_session's, $AGENT_CHAT_AGENT_ID, the config's agent_id, the token's agent)",
    pattern=f"^{iasp.AGENT_NAME.pattern}$",
)
EP_KEY = _str("a whiteboard key: [A-Za-z0-9][A-Za-z0-9._-]*, case-sensitive", minLength=1)
EP_TOOLS: list[Tool] = [
    Tool(
        "start_session",
        "EP-0118: register this session as an agent (the EP's start_session): 201 new, 200 "
        "reclaimed with the same run_token, AGENT_ALREADY_ACTIVE when a live session holds "
        "the id. Omit agent_id for a new sub-agent id. Later EP tools act as it.",
        _obj(
            [],
            session_id=EP_SESSION,
            agent_id=EP_AGENT,
            harness_conversation_id=_str("your harness's conversation id", maxLength=200),
            harness=_str("what runs you (default mcp)", minLength=1, maxLength=100),
            substrate=_str("your model", maxLength=100),
            run_token=_str("the run token of a registration to reclaim", maxLength=200),
        ),
        ep_start_session,
    ),
    Tool(
        "signal",
        "EP-0118: send a typed signal to an agent, a sub-agent namespace (alice.critic) or * "
        "(everyone). It is a message of the session's channel.",
        _obj(
            ["to", "content"],
            to=_str("an agent id, or *", minLength=1, maxLength=64),
            content=_str("the signal's text", minLength=1),
            type={"type": "string", "enum": list(iasp.SIGNAL_TYPES), "default": "inform"},
            sender_id=EP_AGENT,
            session_id=EP_SESSION,
        ),
        ep_signal,
    ),
    Tool(
        "read_signals",
        "EP-0118: your signals (to you, a sub-agent of yours, or *), ascending; unread only by "
        "default. A pure query: asking twice answers the same; ack_signals marks them read.",
        _obj(
            [],
            agent_id=EP_AGENT,
            unread_only={"type": "boolean", "default": True},
            session_id=EP_SESSION,
        ),
        ep_read_signals,
        read_only=True,
    ),
    Tool(
        "ack_signals",
        "EP-0118: mark exactly these signals read, for you only (a broadcast stays unread for "
        "the others). All or nothing.",
        _obj(
            ["signal_ids"],
            agent_id=EP_AGENT,
            signal_ids={
                "type": "array",
                "items": {"type": "string", "minLength": 1, "maxLength": 128},
                "minItems": 1,
                "maxItems": 1000,
                "description": "the ids read_signals lists",
            },
            session_id=EP_SESSION,
        ),
        ep_ack_signals,
    ),
    Tool(
        "list_agents",
        "EP-0118: the registered agents (of the session, when one is named or configured) with "
        "status (active, idle, sleeping, stale), last_seen and harness.",
        _obj([], session_id=EP_SESSION),
        ep_list_agents,
        read_only=True,
    ),
    Tool(
        "write_whiteboard",
        "EP-0118: set a key of the session's shared whiteboard (any JSON, a string as the EP "
        "has it; at most 64 KiB). Audited.",
        _obj(
            ["key", "value"],
            key=EP_KEY,
            value={"description": "the value: any JSON"},
            agent_id=EP_AGENT,
            session_id=EP_SESSION,
        ),
        ep_write_whiteboard,
    ),
    Tool(
        "read_whiteboard",
        "EP-0118: one key of the session's whiteboard: value, updated_by, updated_at "
        "(KEY_NOT_FOUND when unset).",
        _obj(["key"], key=EP_KEY, session_id=EP_SESSION),
        ep_read_whiteboard,
        read_only=True,
    ),
    Tool(
        "tired",
        "EP-0118: you have finished: go idle, and learn how many others of your session are "
        "still active (`others_active`) and whether you are the last one out (`last`).",
        _obj([], agent_id=EP_AGENT, note=_str("what you leave said", maxLength=2000)),
        ep_tired,
    ),
    Tool(
        "read_notes",
        "EP-0118: the session's notes: its last `limit` messages (every message of the "
        "channel, signals and audit messages included), ascending; moves no cursor.",
        _obj(
            [],
            session_id=EP_SESSION,
            limit={"type": "integer", "minimum": 1, "maximum": iasp.NOTES_MAX, "default": 50},
        ),
        ep_read_notes,
        read_only=True,
    ),
]
