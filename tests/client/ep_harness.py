"""A harness written from EP-0118 (the Inter-Agent Signal Protocol) alone: it drives the EP's MCP
tools (§5) through the official MCP SDK's client, its inbox resource (§7), and its CLI verbs
(§6) through subprocesses, and fails (an AssertionError, exit 1) on the first departure.

It imports nothing of the project's: only the standard library and the ``mcp`` SDK. What it
must be told is what the EP leaves to an implementation: the command that serves MCP, the CLI's
executable, the server's URL and one token per persona (``AGENT_CHAT_URL``, the tokens of
``alice``, ``bob`` and ``carol``), and a session that exists. The inbox resource's URI is found
among the server's resource templates: the one with ``{session_id}`` and ``{agent_id}``.

    python ep_harness.py --cli /path/agentchat --session s1 \\
        --token alice=ac_… --token bob=ac_… --token carol=ac_… [--url http://…]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import warnings
from contextlib import AsyncExitStack
from typing import Any

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPDeprecationWarning

PUSH_BOUND = 5.0  # a failure bound only: the notification itself is the signal
CLI_BOUND = 30.0  # "never blocking": each verb well under this
AMBIGUOUS_EXIT = 4  # AmbiguousIdentityError's exit status (the implementation's, documented)


class Harness:
    def __init__(self, options: argparse.Namespace) -> None:
        self.cli = options.cli
        self.session = options.session
        self.url = options.url
        self.tokens = dict(item.split("=", 1) for item in options.token)
        self.passed: list[str] = []

    def ok(self, what: str) -> None:
        self.passed.append(what)
        print(f"ok {len(self.passed)} - {what}", flush=True)

    # --- the MCP side ---------------------------------------------------------------------

    def params(self, persona: str) -> StdioServerParameters:
        env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": os.environ.get("HOME", "/tmp"),
            "AGENT_CHAT_URL": self.url,
            "AGENT_CHAT_TOKEN": self.tokens[persona],
            # The EP's environment (§6): the session the tools default to.
            "TUR_ACTIVE_SESSION_ID": self.session,
        }
        for name in ("PYTHONPATH", "AGENT_CHAT_CONFIG", "XDG_CONFIG_HOME"):
            if os.environ.get(name):
                env[name] = os.environ[name]
        return StdioServerParameters(command=self.cli, args=["mcp"], env=env)

    @staticmethod
    async def call(client: Client, tool: str, **args: Any) -> Any:
        result = await client.call_tool(tool, args)
        assert result.is_error is not True, (tool, args, result.content)
        return result.structured_content

    @staticmethod
    async def refused(client: Client, tool: str, **args: Any) -> str:
        result = await client.call_tool(tool, args)
        assert result.is_error is True, (tool, args, result.structured_content)
        [content] = result.content
        assert isinstance(content, types.TextContent)
        return content.text

    async def run_mcp(self) -> None:
        updates: list[str] = []
        arrived = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                updates.append(str(message.params.uri))
                arrived.set()

        async with AsyncExitStack() as stack:
            alice = await stack.enter_async_context(Client(self.params("alice")))
            bob = await stack.enter_async_context(
                Client(self.params("bob"), mode="legacy", message_handler=on_message)
            )
            names = {tool.name for tool in (await alice.list_tools()).tools}
            ep_tools = {
                "signal",
                "read_signals",
                "ack_signals",
                "list_agents",
                "write_whiteboard",
                "read_whiteboard",
                "tired",
                "read_notes",
            }
            assert ep_tools <= names, ep_tools - names
            self.ok("the EP's eight MCP tools are listed")

            # §1: registration (start_session), then the registry (list_agents).
            a = await self.call(alice, "start_session", agent_id="alice", harness="harness-a")
            b = await self.call(bob, "start_session", agent_id="bob", harness="harness-b")
            assert (a["agent"], b["agent"]) == ("alice", "bob"), (a, b)
            listed = await self.call(alice, "list_agents")
            status = {entry["agent"]: entry["status"] for entry in listed["agents"]}
            assert status.get("alice") == "active" and status.get("bob") == "active", status
            assert {"alice", "bob"} <= {e["agent"] for e in listed["agents"]}
            harness = {entry["agent"]: entry.get("harness") for entry in listed["agents"]}
            assert harness["alice"] == "harness-a", harness
            self.ok("start_session registers; list_agents shows both active")
            again = await self.refused(
                alice, "start_session", agent_id="alice", harness="x", run_token="another"
            )
            assert "409" in again or "ALREADY_ACTIVE" in again, again
            self.ok("a second live registration of one id is refused (409)")

            # §2: dot namespaces. A signal to bob.critic concerns bob.critic and bob, not
            # bob.popper; one to bob does not concern bob.critic.
            to_critic = await self.call(alice, "signal", to="bob.critic", content="review T-1")
            to_bob = await self.call(alice, "signal", to="bob", content="for bob", type="query")

            async def unread(agent: str) -> list[str]:
                body = await self.call(bob, "read_signals", agent_id=agent)
                return [s["id"] for s in body["signals"]]

            assert await unread("bob") == [to_critic["id"], to_bob["id"]]
            assert await unread("bob.critic") == [to_critic["id"]]
            assert await unread("bob.popper") == []
            self.ok("namespace routing: parent sees the sub-agent's, siblings and children don't")

            # §5: read_signals is a pure query; ack_signals marks for that agent only.
            first = await self.call(bob, "read_signals", agent_id="bob")
            second = await self.call(bob, "read_signals", agent_id="bob")
            assert first == second and len(first["signals"]) == 2, (first, second)
            self.ok("read_signals twice answers the same")
            everyone = await self.call(alice, "signal", to="*", content="standup", type="inform")
            acked = await self.call(bob, "ack_signals", agent_id="bob", signal_ids=[everyone["id"]])
            assert acked["acked"] == [everyone["id"]], acked
            assert everyone["id"] not in await unread("bob")
            assert everyone["id"] in await unread("bob.critic")
            assert to_critic["id"] in await unread("bob")  # only the id given was marked
            all_of_bob = await self.call(bob, "read_signals", agent_id="bob", unread_only=False)
            read_at = {s["id"]: s["read_at"] for s in all_of_bob["signals"]}
            assert read_at[everyone["id"]] is not None and read_at[to_bob["id"]] is None
            self.ok("ack_signals of a broadcast hides it from that agent only")

            # sender_id: a sub-agent of the caller's namespace sends.
            popper = await self.call(
                alice, "signal", to="bob", content="from a sub-agent", sender_id="alice.popper"
            )
            assert popper["from"] == "alice.popper", popper
            refused = await self.refused(alice, "signal", to="bob", content="x", sender_id="bob")
            assert "FORBIDDEN" in refused or "MISMATCH" in refused, refused
            self.ok("sender_id acts as a sub-agent; another agent's id is refused")

            # The whiteboard.
            wrote = await self.call(alice, "write_whiteboard", key="goal", value="ship v2")
            assert wrote["updated_by"] == "alice", wrote
            entry = await self.call(bob, "read_whiteboard", key="goal")
            assert (entry["value"], entry["updated_by"]) == ("ship v2", "alice"), entry
            missing = await self.refused(bob, "read_whiteboard", key="Goal")  # case-sensitive
            assert "NOT_FOUND" in missing, missing
            self.ok("write_whiteboard / read_whiteboard")

            notes = await self.call(bob, "read_notes", limit=3)
            seqs = [m["seq"] for m in notes["messages"]]
            assert len(seqs) == 3 and seqs == sorted(seqs), notes
            self.ok("read_notes: the last notes, ascending")

            # §7: the inbox, subscribed; pushed on each new signal that concerns bob.
            templates = (await bob.list_resource_templates()).resource_templates
            [template] = [
                t.uri_template
                for t in templates
                if "{session_id}" in t.uri_template and "{agent_id}" in t.uri_template
            ]
            inbox = template.replace("{session_id}", self.session).replace("{agent_id}", "bob")
            critic_inbox = inbox[: -len("bob")] + "bob.critic"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", MCPDeprecationWarning)
                await bob.subscribe_resource(inbox)
                await bob.subscribe_resource(critic_inbox)
            # Not bob's: no update of his inbox (a signal to carol, a plain post of bob's).
            await self.call(alice, "signal", to="carol", content="not for bob")
            started = time.monotonic()
            pushed = await self.call(alice, "signal", to="bob", content="ping", type="warn")
            with anyio.fail_after(PUSH_BOUND):
                await arrived.wait()
            elapsed = time.monotonic() - started
            assert elapsed < 1.0, f"the inbox update came after {elapsed:.3f} s"
            assert updates == [inbox], updates  # not bob.critic's: a signal to bob
            after_push = await unread("bob")
            assert after_push[-1] == pushed["id"], after_push
            content = (await bob.read_resource(inbox)).contents[0]
            assert isinstance(content, types.TextResourceContents)
            assert pushed["id"] in {s["id"] for s in json.loads(content.text)["signals"]}
            self.ok(f"the inbox resource is pushed within 1 s ({elapsed * 1000:.0f} ms)")
            # A signal to bob.critic concerns bob.critic and bob: both inboxes are pushed.
            updates.clear()
            arrived = anyio.Event()
            await self.call(alice, "signal", to="bob.critic", content="for the critic")
            with anyio.fail_after(PUSH_BOUND):
                while sorted(updates) != sorted([inbox, critic_inbox]):
                    await arrived.wait()
                    arrived = anyio.Event()
            self.ok("a sub-agent's signal pushes its inbox and its parent's")

            # The CLI's verbs, with the MCP sessions still registered.
            self.run_cli(bob_unread=await self.call(bob, "read_signals", agent_id="bob"))

            # §4: tired, the last one out knows it.
            first_out = await self.call(alice, "tired", note="done")
            assert first_out["status"] == "idle" and first_out["last"] is False, first_out
            assert first_out["others_active"] >= 1, first_out
            last_out = await self.call(bob, "tired")
            assert last_out["last"] is True and last_out["others_active"] == 0, last_out
            self.ok("tired: others active for the first, last: true for the last one")

    # --- the CLI side ---------------------------------------------------------------------

    def verb(self, persona: str, *argv: str, env: dict[str, str] | None = None) -> Any:
        base = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("TUR_", "AGENT_CHAT_"))
        }
        base.update({"AGENT_CHAT_URL": self.url, "AGENT_CHAT_TOKEN": self.tokens[persona]})
        started = time.monotonic()
        done = subprocess.run(
            [self.cli, *argv],
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=CLI_BOUND,
        )
        assert time.monotonic() - started < CLI_BOUND
        return done

    def verb_ok(self, persona: str, *argv: str, env: dict[str, str] | None = None) -> str:
        done = self.verb(persona, *argv, env=env)
        assert done.returncode == 0, (argv, done.returncode, done.stderr)
        out: str = done.stdout
        return out

    def run_cli(self, *, bob_unread: dict[str, Any]) -> None:
        s = ("--session-id", self.session)
        # --json is the server's body: the same as read_signals' through MCP, one line.
        raw = self.verb_ok("bob", "read-signals", "--json", "--agent-id", "bob", *s)
        assert raw.endswith("\n") and raw.count("\n") == 1, raw
        assert json.loads(raw) == bob_unread, (raw, bob_unread)
        self.ok("read-signals --json: exactly the tool's body")

        for agent in ("carol", "carol.a", "carol.b"):
            self.verb_ok("carol", "start-session", "--harness", "cli", "--agent-id", agent, *s)
        listed = json.loads(self.verb_ok("carol", "list-agents", "--json", *s))
        status = {entry["agent"]: entry["status"] for entry in listed["agents"]}
        assert all(status.get(a) == "active" for a in ("carol", "carol.a", "carol.b")), status
        self.ok("list-agents --json after three registrations")

        # AmbiguousIdentityError: three active agents under carol's token, none named.
        done = self.verb("carol", "read-signals", *s)
        assert done.returncode == AMBIGUOUS_EXIT, (done.returncode, done.stderr)
        assert done.stdout == "" and done.stderr.count("\n") == 1, done.stderr
        assert "AMBIGUOUS_IDENTITY" in done.stderr, done.stderr
        twice = self.verb(
            "carol",
            "signal",
            "bob",
            "x",
            *s,
            env={"TUR_AGENT_ID": "carol.a", "AGENT_CHAT_AGENT_ID": "carol.b"},
        )
        assert twice.returncode == AMBIGUOUS_EXIT, (twice.returncode, twice.stderr)
        self.ok("an ambiguous identity is refused with its exit status and one line")

        # The EP's environment names the agent and the session (§6, medium priority).
        env = {"TUR_AGENT_ID": "carol.a", "TUR_ACTIVE_SESSION_ID": self.session}
        line = self.verb_ok("carol", "signal", "bob", "from carol.a", "--type", "delegate", env=env)
        assert line.startswith("signaled "), line
        mine = json.loads(self.verb_ok("bob", "read-signals", "--json", "--agent-id", "bob", *s))
        [sent] = [x for x in mine["signals"] if x["content"] == "from carol.a"]
        assert (sent["from"], sent["type"], sent["to"]) == ("carol.a", "delegate", "bob"), sent
        self.ok("signal as a sub-agent (TUR_AGENT_ID), the parent's token")

        # ack-signals, then read-signals --all shows it read and --unread-only hides it.
        self.verb_ok("bob", "ack-signals", sent["id"], "--agent-id", "bob", *s)
        unread = json.loads(
            self.verb_ok("bob", "read-signals", "--unread-only", "--json", "--agent-id", "bob", *s)
        )
        assert sent["id"] not in {x["id"] for x in unread["signals"]}
        every = json.loads(
            self.verb_ok("bob", "read-signals", "--all", "--json", "--agent-id", "bob", *s)
        )
        [again] = [x for x in every["signals"] if x["id"] == sent["id"]]
        assert again["read_at"] is not None, again
        critic = json.loads(
            self.verb_ok("bob", "read-signals", "--json", "--agent-id", "bob.critic", *s)
        )
        assert all(x["to"] in ("bob.critic", "*") for x in critic["signals"]), critic
        self.ok("ack-signals; read-signals --unread-only / --all")

        self.verb_ok("carol", "whiteboard-write", "owner", "carol.b", "--agent-id", "carol.b", *s)
        value = self.verb_ok("alice", "whiteboard-read", "owner", *s)
        assert value == "carol.b\n", value
        entry = json.loads(self.verb_ok("alice", "whiteboard-read", "owner", "--json", *s))
        assert entry["updated_by"] == "carol.b", entry
        self.ok("whiteboard-write / whiteboard-read")

        notes = json.loads(self.verb_ok("alice", "read-notes", "--limit", "4", "--json", *s))
        seqs = [m["seq"] for m in notes["messages"]]
        assert len(seqs) == 4 and seqs == sorted(seqs), seqs
        self.ok("read-notes --limit")

        for agent in ("carol.a", "carol.b", "carol"):
            tired = json.loads(self.verb_ok("carol", "tired", "--json", "--agent-id", agent, *s))
            assert tired["status"] == "idle" and tired["last"] is False, tired  # alice, bob
        self.ok("tired from the CLI: others (the MCP sessions) still active")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--cli", required=True, help="the CLI's executable (it serves `mcp`)")
    parser.add_argument("--session", required=True)
    parser.add_argument("--url", default=os.environ.get("AGENT_CHAT_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--token", action="append", required=True, help="persona=token")
    harness = Harness(parser.parse_args(argv))
    try:
        anyio.run(harness.run_mcp)
    except AssertionError as exc:
        print(f"not ok {len(harness.passed) + 1} - {exc!r}"[:4000], flush=True)
        return 1
    print(f"1..{len(harness.passed)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
