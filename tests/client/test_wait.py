"""``agentchat wait``: woken by another agent's post at once, the cursor moved only past what it
printed, a timeout that moves nothing, and a wait that outlives a server restart.

The tests learn that a wait is parked from its trace (``AGENT_CHAT_TRACE=1``: a stderr line
when it holds the websocket), never from a sleep.
"""

from __future__ import annotations

import json
import signal
import time

import pytest

from agentchat import serve
from tests.client.cli_run import Agentchat
from tests.conftest import ServerProcess
from tests.signals import sigint_as_a_terminal_has_it

RULE = "=" * 70


def parked(proc, timeout: float = 20.0) -> str:
    """Read the wait's stderr until it says it holds the websocket; return what it said."""
    said = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the wait ended before it parked: {said}{proc.stderr.read()}")
        said += line
        if "trace: subscribed" in line:
            return said
    raise AssertionError(f"the wait did not park: {said}")


def traced(run: Agentchat) -> Agentchat:
    class Traced(Agentchat):
        def env(self) -> dict[str, str]:
            return {**super().env(), "AGENT_CHAT_TRACE": "1"}

    return Traced(run.url, run.token, run.home)


@pytest.fixture
def pair(live, make_agent, tmp_path):
    _, alice_token = make_agent("alice")
    _, bob_token = make_agent("bob")
    alice = Agentchat(live.url, alice_token, tmp_path)
    bob = Agentchat(live.url, bob_token, tmp_path)
    assert alice("init", "review").returncode == 0
    return alice, bob


def bob_cursor(bob: Agentchat) -> int:
    result = bob("roster", "review", "--json")
    return json.loads(result.stdout)["cursor"]


def test_wait_is_woken_by_another_agents_post_within_a_second(pair):
    alice, bob = pair
    waiter = traced(bob).popen("wait", "review", "--timeout", "60")
    parked(waiter)
    posted_at = time.monotonic()
    assert alice("post", "review", "--to", "bob", "--title", "ping", "--body", "x").returncode == 0
    post_done = time.monotonic()
    out, err = waiter.communicate(timeout=30)
    woke = time.monotonic() - post_done
    assert waiter.returncode == 0, err
    assert out.startswith(RULE + "\n---\nseq: 1\nfrom: alice\nto: bob\n")
    assert "title: ping" in out
    # Measured from the end of the post (a process start included in neither).
    assert woke < 2.0, f"woken {woke:.2f} s after the post ({post_done - posted_at:.2f} s to post)"
    assert bob_cursor(bob) == 1


def test_wait_skips_what_is_not_for_it_and_acks_what_it_printed(pair):
    alice, bob = pair
    assert (
        alice("post", "review", "--to", "carol", "--title", "not bob", "--body", "x").returncode
        == 0
    )
    assert bob("post", "review", "--title", "own", "--body", "x").returncode == 0
    waiter = traced(bob).popen("wait", "review", "--timeout", "60", "--interval", "0.1")
    parked(waiter)  # nothing relevant yet: it parks after looking at seq 1 and 2
    assert alice("post", "review", "--title", "for all", "--body", "x").returncode == 0
    out, err = waiter.communicate(timeout=30)
    assert waiter.returncode == 0, err
    assert out.count(RULE) == 1 and "title: for all" in out
    assert bob_cursor(bob) == 3


def test_wait_returns_what_is_already_there_at_once(pair):
    alice, bob = pair
    for title in ("one", "two"):
        assert alice("post", "review", "--title", title, "--body", "x").returncode == 0
    result = bob("wait", "review", "--timeout", "0")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count(RULE) == 2
    assert bob_cursor(bob) == 2
    body = json.loads(bob("read", "review", "--json").stdout)
    assert body["messages"] == []


def test_a_timeout_exits_2_and_moves_nothing(pair):
    _, bob = pair
    assert bob("post", "review", "--title", "own", "--body", "x").returncode == 0
    result = bob("wait", "review", "--timeout", "0.3")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr == "(timeout after 0.3s: no new messages for bob in 'review')\n"
    assert bob_cursor(bob) == 0
    timed = bob("wait", "review", "--timeout", "0", "--json")
    assert timed.returncode == 2 and json.loads(timed.stdout)["timed_out"] is True


def test_a_wait_killed_while_parked_consumed_nothing(pair):
    alice, bob = pair
    waiter = traced(bob).popen("wait", "review", "--timeout", "60")
    parked(waiter)
    waiter.send_signal(signal.SIGKILL)
    waiter.communicate(timeout=10)
    assert alice("post", "review", "--title", "after", "--body", "x").returncode == 0
    assert bob_cursor(bob) == 0
    assert "title: after" in bob("read", "review").stdout


def test_ctrl_c_exits_130(pair):
    _, bob = pair
    with sigint_as_a_terminal_has_it():
        waiter = traced(bob).popen("wait", "review", "--timeout", "60")
    parked(waiter)
    waiter.send_signal(signal.SIGINT)
    _, err = waiter.communicate(timeout=10)
    assert waiter.returncode == 130
    assert err.endswith("agentchat: cancelled by user\n")


def test_wait_refuses_another_identity(pair):
    _, bob = pair
    result = bob("wait", "review", "--as", "alice", "--timeout", "0")
    assert result.returncode == 1
    assert result.stderr.startswith("agentchat: SENDER_MISMATCH: ")


def test_wait_survives_a_server_restart(live, make_agent, tmp_path, monkeypatch):
    # A server of its own (the session's is shared), stopped and started again on the same
    # port and database while the wait is parked.
    server = ServerProcess()
    port = server.port
    try:
        _, alice_token = make_agent("alice")
        _, bob_token = make_agent("bob")
        alice = Agentchat(server.url, alice_token, tmp_path)
        bob = Agentchat(server.url, bob_token, tmp_path)
        assert alice("init", "review").returncode == 0
        waiter = traced(bob).popen("wait", "review", "--timeout", "120")
        parked(waiter)
        server.stop()
        monkeypatch.setattr(serve, "free_port", lambda: port)
        server = ServerProcess()
        assert server.port == port
        said = parked(waiter)  # it reconnected by itself
        assert "retry after" in said
        assert (
            alice("post", "review", "--to", "bob", "--title", "back", "--body", "x").returncode == 0
        )
        post_done = time.monotonic()
        out, err = waiter.communicate(timeout=30)
        assert waiter.returncode == 0, err
        assert time.monotonic() - post_done < 2.0
        assert out.count(RULE) == 1 and "title: back" in out
        assert bob_cursor(bob) == 1
    finally:
        server.stop()
