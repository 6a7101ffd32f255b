"""The host hooks: counts right, no cursor moved, exit 0 and fast even with no server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agentchat.client.api import Client

ROOT = Path(__file__).resolve().parents[2]


def hook(*args: str, env: dict[str, str] | None = None, home: Path) -> tuple[int, str, str, float]:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "agentchat.client.hooks", *args],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "HOME": str(home), **(env or {})},
        stdin=subprocess.DEVNULL,
    )
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


@pytest.fixture
def world(live: Any, make_agent: Any, tmp_path: Path) -> dict[str, Any]:
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob")}
    with Client(live.url, tokens["alice"]) as alice:
        alice.request("POST", "channels/", json={"name": "review"})
        alice.request("POST", "channels/", json={"name": "quiet"})
        alice.request("POST", "channels/review/messages/", json={"title": "own"})
    with Client(live.url, tokens["bob"]) as bob:
        for title in ("one", "two"):
            bob.request("POST", "channels/review/messages/", json={"title": title})
        bob.request("POST", "channels/review/messages/", json={"title": "x", "to": "carol"})
    env = {"AGENT_CHAT_URL": live.url, "AGENT_CHAT_TOKEN": tokens["alice"]}
    return {"url": live.url, "tokens": tokens, "env": env, "home": tmp_path}


def test_prompt_and_session_start_print_the_unread_counts(world: dict[str, Any]) -> None:
    for event in ("session-start", "prompt"):
        code, out, err, _ = hook(event, env=world["env"], home=world["home"])
        assert (code, out, err) == (0, "2 unread in channel review\n", "")
    code, out, _, _ = hook("prompt", "--channel", "quiet", env=world["env"], home=world["home"])
    assert (code, out) == (0, "")


def test_stop_prints_the_hosts_json_and_moves_no_cursor(world: dict[str, Any]) -> None:
    code, out, err, _ = hook("stop", "--channel", "review", env=world["env"], home=world["home"])
    assert (code, err) == (0, "")
    assert json.loads(out) == {"systemMessage": "2 unread in channel review"}
    with Client(world["url"], world["tokens"]["alice"]) as alice:
        channel = alice.request("GET", "channels/review/")
        assert (channel["cursor"], channel["unread"]) == (0, 2)
        alice.request("POST", "channels/review/read/")
    code, out, _, _ = hook("stop", env=world["env"], home=world["home"])
    assert (code, out) == (0, "")


def test_the_config_files_channel_is_the_default(world: dict[str, Any]) -> None:
    config = world["home"] / "agentchat.toml"
    config.write_text('channel = "quiet"\n')
    env = {**world["env"], "AGENT_CHAT_CONFIG": str(config)}
    assert hook("prompt", env=env, home=world["home"])[:3] == (0, "", "")


def test_a_bad_token_or_channel_is_one_line_on_stderr_and_exit_0(world: dict[str, Any]) -> None:
    env = {**world["env"], "AGENT_CHAT_TOKEN": "nope"}
    code, out, err, _ = hook("stop", env=env, home=world["home"])
    assert (code, out) == (0, "")
    assert err.startswith("agentchat hook: AUTH_INVALID: ") and err.count("\n") == 1
    code, out, err, _ = hook("stop", "--channel", "nowhere", env=world["env"], home=world["home"])
    assert (code, out) == (0, "")
    assert err.startswith("agentchat hook: CHANNEL_NOT_FOUND: ")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A socket that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize("event", ["session-start", "prompt", "stop"])
def test_no_server_exits_0_at_once(event: str, tmp_path: Path) -> None:
    env = {"AGENT_CHAT_URL": f"http://127.0.0.1:{free_port()}", "AGENT_CHAT_TOKEN": "t"}
    code, out, err, took = hook(event, env=env, home=tmp_path)
    assert (code, out) == (0, "")
    assert err.startswith("agentchat hook: SERVER_UNREACHABLE: ")
    assert took < 2.0, took


def test_a_server_that_never_answers_is_given_up_within_the_timeout(
    silent_server: str, tmp_path: Path
) -> None:
    env = {"AGENT_CHAT_URL": silent_server, "AGENT_CHAT_TOKEN": "t"}
    code, out, err, took = hook("stop", "--timeout", "0.5", env=env, home=tmp_path)
    assert (code, out) == (0, "")
    assert "no answer from the server within 0.5 s" in err
    assert took < 2.0, took


def test_a_bad_invocation_still_exits_0(tmp_path: Path) -> None:
    code, out, _, _ = hook("lunch", home=tmp_path)
    assert (code, out) == (0, "")
