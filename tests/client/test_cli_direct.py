"""``agentchat send``, ``receipt`` and ``contacts`` against a live server: the HTTP v1 direct
messages from the command line, their output lines, ``--json`` exactly the server's body, the
exit codes and one-line errors, terminal-safe output. The CLI runs in this process
(``tests/client/cli_run.py``: its environment, stdin, stdout and stderr its own), one send as a
child process, as a shell runs it."""

from __future__ import annotations

import json

import pytest

from agentchat.client.api import Client
from tests.client.cli_run import Agentchat


@pytest.fixture
def agents(live, make_agent, tmp_path):
    """alice, bob and carol: each an ``Agentchat`` and a token."""
    made = {}
    for name in ("alice", "bob", "carol"):
        _, token = make_agent(name)
        made[name] = Agentchat(live.url, token, tmp_path)
    return made


def run(agent: Agentchat, *args: str, input: str = ""):
    return agent(*args, input=input)


def ok(result) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    assert result.stderr == ""
    return result.stdout


def fails(result, code: str, exit_code: int) -> str:
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert result.stdout == ""
    assert result.stderr.startswith(f"agentchat: {code}: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    return result.stderr


def inbox(live, agent: Agentchat, name: str) -> dict:
    with Client(live.url, agent.token) as client:
        return client.request("GET", f"/v1/agents/{name}/inbox")


def test_send_then_receipt_through_the_cli(agents, live):
    alice, bob = agents["alice"], agents["bob"]
    send = (
        *("send", "bob", "Please inspect this result"),
        *("--conversation-id", "task-42", "--correlation-id", "request-7"),
        *("--data", '{"priority": 2}', "--meta", "trace_id=abc123", "--id", "msg-cli-1"),
    )
    line = ok(alice.subprocess(*send))  # the one child process: as a shell runs it
    assert line == "sent msg-cli-1 -> bob (conversation task-42)\n"
    [delivery] = inbox(live, bob, "bob")["deliveries"]
    envelope = delivery["envelope"]
    assert envelope["from"] == "alice" and envelope["correlation_id"] == "request-7"
    assert envelope["message"]["data"] == {"priority": 2}
    assert envelope["metadata"] == {"trace_id": "abc123"}

    # A retry with the same id is the stored envelope, never a second one; --json is its body.
    again = json.loads(ok(run(alice, *send, "--json")))
    assert again == envelope
    assert inbox(live, bob, "bob")["tail"] == 1

    receipt = ok(run(bob, "receipt", "msg-cli-1", "processed", "--detail", "Result attached"))
    assert receipt.startswith("receipt msg_") and receipt.endswith(
        " -> alice: processed for msg-cli-1\n"
    )
    [answer] = inbox(live, alice, "alice")["deliveries"]
    assert answer["envelope"]["kind"] == "receipt"
    assert answer["envelope"]["message"]["data"] == {
        "message_id": "msg-cli-1",
        "status": "processed",
        "detail": "Result attached",
    }
    assert answer["envelope"]["conversation_id"] == "task-42"  # the original's
    body = json.loads(ok(run(bob, "receipt", "msg-cli-1", "read", "--json")))
    assert body["kind"] == "receipt" and body["to"] == "alice"


def test_send_errors_are_one_line_with_the_clis_exit_codes(agents, live):
    alice = agents["alice"]
    fails(run(alice, "send", "nobody", "hi"), "AGENT_NOT_FOUND", 1)
    fails(run(alice, "send", "bob", "hi", "--data", "{not json"), "USAGE", 2)
    fails(run(alice, "send", "bob", "hi", "--meta", "novalue"), "USAGE", 2)
    fails(run(alice, "receipt", "msg_x", "seen"), "USAGE", 2)  # not a status
    fails(run(alice, "receipt", "msg_never_received", "read"), "MESSAGE_NOT_FOUND", 1)
    ok(run(alice, "send", "bob", "one", "--id", "same"))
    fails(run(alice, "send", "bob", "other", "--id", "same"), "ID_CONFLICT", 1)
    fails(run(Agentchat(live.url, "ac_bad", alice.home), "send", "bob", "x"), "AUTH_INVALID", 1)
    assert inbox(live, agents["bob"], "bob")["tail"] == 1  # the refused sends stored nothing


def test_what_is_printed_is_terminal_safe_and_json_exact(agents, live):
    alice = agents["alice"]
    hostile = "\x1b]0;owned\x07\u202e"
    card = {"id": "carol", "display_name": "Carol", "labels": {"note": f"x{hostile}"}}
    ok(run(alice, "contacts", "save", "-", input=json.dumps(card)))
    shown = ok(run(alice, "contacts", "show", "carol"))
    assert "\x1b" not in shown and "\u202e" not in shown and "\x07" not in shown
    assert "labels: note=x\\x1b]0;owned\\x07\\u202e\n" in shown
    raw = ok(run(alice, "contacts", "show", "carol", "--json"))
    assert "\x1b" not in raw and "\\u001b" in raw
    assert json.loads(raw)["labels"] == card["labels"]  # the same JSON
    # An error quoting hostile input stays one safe line.
    error = fails(run(alice, "send", f"bob{hostile}", "x"), "INVALID_VALUE", 1)
    assert "\x1b" not in error and "\u202e" not in error


def test_contact_handoff_through_the_cli(agents, live, tmp_path):
    alice, bob = agents["alice"], agents["bob"]
    assert ok(run(bob, "contacts")) == "(no contacts yet)\n"
    path = tmp_path / "carol.json"
    path.write_text(
        json.dumps(
            {
                "id": "carol",
                "display_name": "Carol",
                "endpoint": "https://agents.example.net",
                "capabilities": ["research"],
                "labels": {"team": "discovery"},
            }
        )
    )
    assert ok(run(alice, "contacts", "save", str(path))) == "saved contact carol\n"
    assert ok(run(alice, "contacts")) == (
        "ID     NAME   ENDPOINT\ncarol  Carol  https://agents.example.net\n"
    )
    assert ok(run(alice, "contacts", "show", "carol")) == (
        "id: carol\ndisplay_name: Carol\nendpoint: https://agents.example.net\n"
        "public_key: -\ncapabilities: research\nlabels: team=discovery\n"
    )
    shared = ok(run(alice, "contacts", "share", "bob", "carol", "--conversation-id", "task-42"))
    assert shared.startswith("shared contact carol -> bob (msg_")
    [delivery] = inbox(live, bob, "bob")["deliveries"]
    envelope = delivery["envelope"]
    assert envelope["kind"] == "contact.share"
    assert envelope["message"]["data"]["contact"]["display_name"] == "Carol"
    assert shared == f"shared contact carol -> bob ({envelope['id']}) (conversation task-42)\n"

    fails(run(alice, "contacts", "accept", envelope["id"]), "MESSAGE_NOT_FOUND", 1)  # the sender
    accepted = ok(run(bob, "contacts", "accept", envelope["id"]))
    assert accepted == "accepted contact carol from alice (event #0)\n"
    again = json.loads(ok(run(bob, "contacts", "accept", envelope["id"], "--json")))
    assert again["type"] == "contact.upsert" and again["seq_num"] == 0
    assert json.loads(ok(run(bob, "contacts", "--json"))) == {
        "contacts": [json.loads(ok(run(bob, "contacts", "show", "carol", "--json")))],
        "more": False,
    }
    # The received envelope never changed.
    assert inbox(live, bob, "bob")["deliveries"][0]["envelope"] == envelope

    fails(run(alice, "contacts", "share", "bob", "dave"), "CONTACT_NOT_FOUND", 1)
    fails(run(alice, "contacts", "show", "dave"), "CONTACT_NOT_FOUND", 1)
    fails(run(alice, "contacts", "save", "-", input="[1]"), "USAGE", 2)
    fails(run(alice, "contacts", "save", str(tmp_path / "missing.json")), "BODY_UNREADABLE", 1)
