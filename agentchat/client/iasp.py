"""EP-0118's surfaces (the Inter-Agent Signal Protocol): who and where a call of the EP's
tools (``agentchat mcp``) and verbs (``agentchat signal`` …) is, and the REST calls behind them.

The EP's session is a channel, its agent id the acting agent: the token's own, or one of its
sub-agents through the ``AgentChat-As`` header (``Client(acting=)``). Both are resolved as the
EP's §6 says, the first place that has them winning:

1. the call's own argument (``--agent-id`` / ``--session-id``, ``agent_id`` / ``session_id``);
2. the environment: ``AGENT_CHAT_AGENT_ID`` / ``AGENT_CHAT_SESSION_ID``, or the EP's own
   ``TUR_AGENT_ID`` / ``TUR_ACTIVE_SESSION_ID`` (both spellings set and different:
   ``AMBIGUOUS_IDENTITY``);
3. the config file: ``agent_id`` and ``channel`` (the default channel);
4. for the agent only, the registry (the CLI's guess, ``agent_guess``): the one live
   registration in the token's namespace, the token's agent when there is none, and
   ``AMBIGUOUS_IDENTITY`` when there are several (the EP's "refuses to guess").

A session that none of them names is ``SESSION_REQUIRED``. Every function here is one REST call
or a bounded run of them (``PAGES_MAX`` pages): nothing blocks, nothing waits.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from typing import Any

from agentchat.client import shapes
from agentchat.client.api import Client, seg
from agentchat.client.errors import ClientError

ENV_AGENT = ("AGENT_CHAT_AGENT_ID", "TUR_AGENT_ID")
ENV_SESSION = ("AGENT_CHAT_SESSION_ID", "TUR_ACTIVE_SESSION_ID")
SIGNAL_TYPES = ("inform", "query", "delegate", "ack", "warn", "sleep_event", "sleep_request")
# The agent-name rule (the server's; a dotted sub-agent name among them) and the channel's.
AGENT_NAME = re.compile(r"[a-z0-9](?:[a-z0-9._-]{0,62}[a-z0-9])?")
CHANNEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
PAGES_MAX = 10  # a list follows the server's pages this far, then answers `more: true`
PAGE = 1000
NOTES_DEFAULT = 50  # the EP's read_notes(limit=50)
NOTES_MAX = 1000
SIGNALS = {"signals": [dict], "more": bool, "next": (int, None)}
AGENTS = {"agents": [{"agent": str, "status": (str, None)}], "more": bool}
HINT = "name it with --agent-id (or agent_id), $AGENT_CHAT_AGENT_ID, or agent_id in the config file"


def _pick(
    given: str | None, env: Mapping[str, str], names: tuple[str, ...], what: str
) -> tuple[str | None, str]:
    """``given``, else the environment's value (the names agreeing), with where it came from."""
    if given:
        return given, "argument"
    found = {name: env[name] for name in names if env.get(name)}
    if len(set(found.values())) > 1:
        spelled = ", ".join(f"${name}={value!r}" for name, value in found.items())
        raise ClientError(
            "AMBIGUOUS_IDENTITY", f"the environment names two {what}s ({spelled}): unset one"
        )
    for name, value in found.items():
        return value, f"${name}"
    return None, ""


def agent_check(name: str, where: str) -> str:
    if not AGENT_NAME.fullmatch(name):
        raise ClientError(
            "INVALID_NAME",
            f"agent id {name[:80]!r} ({where}) breaks the agent-name rule "
            "(1-64 of a-z 0-9 . _ -, a letter or digit at each end)",
        )
    return name


def session_check(name: str, where: str) -> str:
    if not CHANNEL_NAME.fullmatch(name):
        raise ClientError("INVALID_NAME", f"session id {name[:80]!r} ({where}) is no channel name")
    return name


def _declared(
    given: str | None,
    env: Mapping[str, str] | None,
    file: Mapping[str, Any],
    *,
    names: tuple[str, ...],
    what: str,
    key: str,
    check: Callable[[str, str], str],
) -> str | None:
    """What an argument, else the environment (``names``), else the config file's ``key``
    names, through ``check`` with where it came from (None: none)."""
    value, where = _pick(given, os.environ if env is None else env, names, what)
    if value is None and isinstance(file.get(key), str):
        value, where = file[key], f"{key} in the config file"
    return None if value is None else check(value, where)


def agent_declared(
    given: str | None, *, env: Mapping[str, str] | None = None, file: Mapping[str, Any]
) -> str | None:
    """The agent id an argument, the environment or the config file names (None: none)."""
    return _declared(
        given, env, file, names=ENV_AGENT, what="agent id", key="agent_id", check=agent_check
    )


def session_declared(
    given: str | None, *, env: Mapping[str, str] | None = None, file: Mapping[str, Any]
) -> str | None:
    """The session (a channel) an argument, the environment or the config file names."""
    return _declared(
        given, env, file, names=ENV_SESSION, what="session id", key="channel", check=session_check
    )


def session_required(session: str | None) -> str:
    if session is None:
        raise ClientError(
            "SESSION_REQUIRED",
            "no session: name a channel with --session-id (or session_id), "
            "$AGENT_CHAT_SESSION_ID, or channel in the config file",
        )
    return session


def agents_list(client: Client, session: str | None) -> dict[str, Any]:
    """The registry (``GET agents/``), that session's registrations only when one is named,
    following the pages ``PAGES_MAX`` at the most (then ``more: true`` and ``next``)."""
    found: list[Any] = []
    params: dict[str, Any] = {"limit": PAGE, "session": session}
    for _ in range(PAGES_MAX):
        page = client.request("GET", "agents/", params=params, expect=AGENTS)
        found.extend(page["agents"])
        if not page["more"] or not page.get("next"):
            return {"agents": found, "more": False}
        params["after"] = page["next"]
    return {"agents": found, "more": True, "next": params["after"]}


def agent_guess(client: Client, session: str | None) -> str | None:
    """The agent a call names none of is: the one ``active`` registration in the token's
    namespace (in the session, when one is named); None (the token's agent) when there is
    none; ``AMBIGUOUS_IDENTITY`` when there are several, or the registry is too long to tell."""
    me: str = client.request("GET", "me/", expect=shapes.ME)["name"]
    listing = agents_list(client, session)
    live = sorted(
        entry["agent"]
        for entry in listing["agents"]
        if entry["status"] == "active"
        and (entry["agent"] == me or entry["agent"].startswith(me + "."))
    )
    if len(live) > 1 or (listing["more"] and not live):
        shown = ", ".join(live[:5]) + (", …" if len(live) > 5 else "")
        raise ClientError(
            "AMBIGUOUS_IDENTITY",
            f"{len(live)} active agents under the token's {me!r} ({shown}) and none named: " + HINT,
            {"agents": live[:50]},
        )
    return live[0] if live else None


def acting(client: Client, agent: str | None) -> Client:
    """A client of the same server and token acting as ``agent`` (None: the token's own)."""
    if agent is None or agent == client.acting:
        return client
    fresh = Client(
        client.url,
        client.token,
        url_source=client.url_source,
        call_timeout=client.call_timeout,
        acting=agent,
    )
    fresh.until = client.until
    return fresh


def _ch(session: str, rest: str) -> str:
    return f"channels/{seg(session)}/{rest}"


def register(
    client: Client,
    *,
    harness: str,
    session: str | None,
    agent: str | None = None,
    substrate: str | None = None,
    conversation_id: str | None = None,
    run_token: str | None = None,
) -> dict[str, Any]:
    """The EP's ``start_session``: ``POST agents/register/`` (201 new, 200 reclaimed)."""
    body = {
        "harness": harness,
        "session": session,
        "agent": agent,
        "substrate": substrate,
        "conversation_id": conversation_id,
        "run_token": run_token,
    }
    answer: dict[str, Any] = client.request(
        "POST",
        "agents/register/",
        json={k: v for k, v in body.items() if v is not None},
        expect={"agent": str},
    )
    return answer


def signal(client: Client, session: str, *, to: str, content: str, kind: str) -> dict[str, Any]:
    """``signal``: ``POST signals/`` as the client's acting agent."""
    answer: dict[str, Any] = client.request(
        "POST",
        _ch(session, "signals/"),
        json={"to": to, "content": content, "type": kind},
        expect={"id": str, "seq": int, "to": str, "type": str},
    )
    return answer


def signals_read(client: Client, session: str, *, unread_only: bool) -> dict[str, Any]:
    """``read_signals``, a pure query: every page of ``GET signals/`` (``PAGES_MAX`` at most;
    then ``more: true`` with ``next``)."""
    found: list[Any] = []
    params: dict[str, Any] = {"unread_only": unread_only, "limit": PAGE}
    for _ in range(PAGES_MAX):
        page = client.request("GET", _ch(session, "signals/"), params=params, expect=SIGNALS)
        found.extend(page["signals"])
        if not page["more"] or page["next"] is None:
            return {"signals": found, "more": False}
        params["after"] = page["next"]
    return {"signals": found, "more": True, "next": params["after"]}


def signals_ack(client: Client, session: str, ids: list[str]) -> dict[str, Any]:
    """``ack_signals``: ``POST signals/ack/`` (all or nothing)."""
    answer: dict[str, Any] = client.request(
        "POST",
        _ch(session, "signals/ack/"),
        json={"ids": ids},
        expect={"acked": [str], "already_read": [str]},
    )
    return answer


def whiteboard_write(client: Client, session: str, key: str, value: Any) -> dict[str, Any]:
    answer: dict[str, Any] = client.request(
        "PUT",
        _ch(session, f"whiteboard/{seg(key)}/"),
        json={"value": value},
        expect={"key": str, "updated_by": str},
    )
    return answer


def whiteboard_read(client: Client, session: str, key: str) -> dict[str, Any]:
    answer: dict[str, Any] = client.request(
        "GET", _ch(session, f"whiteboard/{seg(key)}/"), expect={"key": str, "value": object}
    )
    return answer


def tired(
    client: Client, *, agent: str | None, note: str | None, run_token: str | None = None
) -> dict[str, Any]:
    """The EP's ``tired``: the idle handshake (``POST agents/idle/``)."""
    body = {"agent": agent, "note": note, "run_token": run_token}
    answer: dict[str, Any] = client.request(
        "POST",
        "agents/idle/",
        json={k: v for k, v in body.items() if v is not None},
        expect={"agent": str, "others_active": int, "last": bool},
    )
    return answer


def notes_read(client: Client, session: str, limit: int) -> dict[str, Any]:
    """``read_notes``: the session's last ``limit`` messages (every message of the channel:
    posts, signals, audit messages), ascending, the cursor unmoved (a peek)."""
    answer: dict[str, Any] = client.request(
        "GET", _ch(session, "messages/"), params={"limit": limit}, expect=shapes.PEEK
    )
    return answer
