"""``agentchat inbox`` and ``agentchat monitor``: the replay, and ``--follow`` in a real child
process surviving a server restart (stopped, then started again on the same port and database)
without losing or repeating a delivery."""

from __future__ import annotations

import json
import queue
import threading

import pytest

from agentchat import serve
from agentchat.core.models import Agent
from channels_app.services import envelope_send
from tests.channels_app.v1.doc_client import AgentChat
from tests.client.cli_run import Agentchat
from tests.conftest import ServerProcess

ADMIN_TOKEN = "admin-" + "c" * 40


class Lines:
    """A child's stdout, a line at a time, each within a deadline."""

    def __init__(self, process) -> None:
        self.process = process
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        for line in self.process.stdout:
            self.queue.put(line)

    def take(self, count: int, timeout: float = 30) -> list[dict]:
        try:
            return [json.loads(self.queue.get(timeout=timeout)) for _ in range(count)]
        except queue.Empty:
            self.process.kill()
            raise AssertionError(f"no line; stderr: {self.process.stderr.read()}") from None


class AdminAgentchat(Agentchat):
    def env(self) -> dict[str, str]:
        return super().env() | {"AGENT_CHAT_ADMIN_TOKEN": ADMIN_TOKEN}


@pytest.fixture
def started(django_db_setup, django_db_blocker, transactional_db):
    servers = []

    def start(port=None):
        with pytest.MonkeyPatch.context() as patch:
            if port is not None:
                patch.setattr(serve, "free_port", lambda: port)
            with django_db_blocker.unblock():
                server = ServerProcess(env={"AGENT_CHAT_ADMIN_TOKEN": ADMIN_TOKEN})
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


def test_replay_prints_the_deliveries_and_the_cursor_to_resume_from(started, make_agent, tmp_path):
    server = started()
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    AgentChat(server.url, alice, "alice").send("bob", text="hello\nthere")
    run = Agentchat(server.url, bob, tmp_path)
    result = run("inbox")
    assert (result.returncode, result.stdout.split(" ", 2)[0]) == (0, "0")
    assert result.stdout.endswith("alice -> bob message hello there\n")
    assert result.stderr == "next cursor: 1\n"
    body = json.loads(run("inbox", "--cursor", "1", "--json").stdout)
    assert (body["deliveries"], body["next_cursor"], body["tail"]) == ([], 1, 1)
    refused = run("inbox", "--cursor", "7")
    assert (refused.returncode, refused.stderr.split(":")[1].strip()) == (2, "INVALID_CURSOR")
    no_admin = run("monitor")
    assert "AGENT_CHAT_ADMIN_TOKEN" in no_admin.stderr and no_admin.returncode == 1


def test_inbox_and_monitor_follow_survive_a_server_restart(started, make_agent, tmp_path):
    server = started()
    _, alice_token = make_agent("alice")
    _, bob_token = make_agent("bob")
    alice = AgentChat(server.url, alice_token, "alice")
    for n in range(2):
        alice.send("bob", text=f"m{n}")
    run = Agentchat(server.url, bob_token, tmp_path)
    inbox = run.popen("inbox", "--follow", "--json")
    monitor = AdminAgentchat(server.url, bob_token, tmp_path).popen("monitor", "--follow", "--json")
    try:
        follows, watches = Lines(inbox), Lines(monitor)
        assert [d["seq_num"] for d in follows.take(2)] == [0, 1]
        assert [d["seq_num"] for d in watches.take(2)] == [0, 1]
        port = server.port
        server.stop()
        # While the server is down a delivery commits (straight to the database).
        envelope_send(sender=Agent.objects.get(name="alice"), to="bob", text="m2")
        server = started(port)
        alice = AgentChat(server.url, alice_token, "alice")
        for n in (3, 4):
            alice.send("bob", text=f"m{n}")
        got = follows.take(3)
        assert [(d["seq_num"], d["envelope"]["message"]["text"]) for d in got] == [
            (2, "m2"),
            (3, "m3"),
            (4, "m4"),
        ]
        assert [d["seq_num"] for d in watches.take(3)] == [2, 3, 4]
        # Nothing is repeated: the next line is the next delivery.
        alice.send("bob", text="m5")
        assert [d["seq_num"] for d in follows.take(1)] == [5]
        assert [d["seq_num"] for d in watches.take(1)] == [5]
    finally:
        for process in (inbox, monitor):
            process.kill()
            process.wait()
