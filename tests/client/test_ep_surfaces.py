"""EP-0118's MCP tools, inbox resource and CLI verbs, against a real server: the harness written
from the EP alone (``ep_harness.py``, run as its own process: it imports nothing of ours), and
the identity and session resolution (``agentchat.client.iasp``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agentchat.client import iasp
from agentchat.client.api import Client
from agentchat.client.errors import CLIENT_CODES, EXIT_AMBIGUOUS, ClientError

ROOT = Path(__file__).resolve().parents[2]
HARNESS = Path(__file__).with_name("ep_harness.py")
CLI = Path(sys.executable).with_name("agentchat")


def test_the_harness_passes_against_a_real_server(
    live: Any, make_agent: Any, tmp_path: Path
) -> None:
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol")}
    with Client(live.url, tokens["alice"]) as alice:
        alice.request("POST", "channels/", json={"name": "s1", "topic": "the session"})
    env = {key: value for key, value in os.environ.items() if not key.startswith("AGENT_CHAT_")}
    env.update({"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")})
    env["PYTHONPATH"] = str(ROOT)
    argv = [sys.executable, str(HARNESS), "--cli", str(CLI), "--session", "s1"]
    argv += ["--url", live.url]
    for name, token in tokens.items():
        argv += ["--token", f"{name}={token}"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not ok" not in done.stdout
    assert "1..20" in done.stdout, done.stdout


def test_the_ambiguity_code_is_stable() -> None:
    assert CLIENT_CODES["AMBIGUOUS_IDENTITY"][0] == EXIT_AMBIGUOUS == 4
    assert ClientError("AMBIGUOUS_IDENTITY", "x").exit_code == 4
    assert ClientError("SESSION_REQUIRED", "x").exit_code == 2


@pytest.mark.parametrize(
    ("given", "env", "file", "expected"),
    [
        ("alice.critic", {"TUR_AGENT_ID": "bob"}, {"agent_id": "carol"}, "alice.critic"),
        (None, {"TUR_AGENT_ID": "bob"}, {"agent_id": "carol"}, "bob"),
        (None, {"AGENT_CHAT_AGENT_ID": "bob", "TUR_AGENT_ID": "bob"}, {}, "bob"),
        (None, {}, {"agent_id": "carol"}, "carol"),
        (None, {}, {}, None),
    ],
)
def test_agent_resolution_order(
    given: str | None, env: dict[str, str], file: dict[str, Any], expected: str | None
) -> None:
    assert iasp.agent_declared(given, env=env, file=file) == expected


def test_two_environments_that_disagree_are_ambiguous() -> None:
    env = {"AGENT_CHAT_AGENT_ID": "alice", "TUR_AGENT_ID": "alice.critic"}
    with pytest.raises(ClientError) as caught:
        iasp.agent_declared(None, env=env, file={})
    assert caught.value.code == "AMBIGUOUS_IDENTITY"
    with pytest.raises(ClientError) as caught:
        iasp.session_declared(
            None, env={"AGENT_CHAT_SESSION_ID": "a", "TUR_ACTIVE_SESSION_ID": "b"}, file={}
        )
    assert caught.value.code == "AMBIGUOUS_IDENTITY"


def test_session_resolution_and_hostile_names() -> None:
    assert iasp.session_declared(None, env={}, file={"channel": "review"}) == "review"
    assert iasp.session_declared(None, env={}, file={}) is None
    with pytest.raises(ClientError) as caught:
        iasp.session_required(None)
    assert caught.value.code == "SESSION_REQUIRED"
    for bad in ("../../etc", "a\nb", "Alice", "x" * 65, "a,b"):
        with pytest.raises(ClientError) as caught:
            iasp.agent_declared(bad, env={}, file={})
        assert caught.value.code == "INVALID_NAME"
    with pytest.raises(ClientError):
        iasp.session_declared("../x", env={}, file={})


def test_the_cli_refuses_an_ambiguous_env_before_any_call(tmp_path: Path) -> None:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "AGENT_CHAT_URL": "http://127.0.0.1:9",  # nothing listens: no call is made
        "AGENT_CHAT_TOKEN": "ac_x",
        "AGENT_CHAT_AGENT_ID": "alice",
        "TUR_AGENT_ID": "alice.critic",
    }
    done = subprocess.run(
        [str(CLI), "signal", "bob", "hi", "--session-id", "s1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4
    assert done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("agentchat: AMBIGUOUS_IDENTITY: the environment names two agent ids")
