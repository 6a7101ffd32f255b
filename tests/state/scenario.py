"""A channel with something in every section of the state summary, built through the API: tasks
in every status (with active, expired and recovered leases, done with and without a lease),
dependencies done and not, locks active, expired and multi-path, decisions, blockers and
verification messages in each spelling the reference recognises, and the quirks it keeps (a
``---`` in a title, CRLF in a body, a multi-line blocker, a ``task.updated`` post that fakes a
completion)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rest_framework.test import APIClient

from channels_app.models import Channel, Message
from channels_app.records import message_json_size
from tests.conftest import FakeClock

CHANNEL = "backend"


def ok(response: Any, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, response.content
    return response.json()


class Scenario:
    def __init__(self, api_for: Callable[[str], APIClient], clock: FakeClock) -> None:
        self.clients = {name: api_for(name) for name in ("alice", "bob", "carol", "dave")}
        self.clock = clock

    def post(self, who: str, title: str, body: str = "", **fields: Any) -> int:
        url = f"/api/v1/channels/{CHANNEL}/messages/"
        sent = {"title": title, "body": body, **fields}
        return ok(self.clients[who].post(url, sent, format="json"), 201)["seq"]

    def forged(self, who: str, title: str, body: str, status: str) -> int:
        """A message labelled with an audit status, which only an import can store now (a
        post is refused: STATUS_RESERVED)."""
        return as_imported(CHANNEL, self.post(who, title, body), status=status)

    def task(self, who: str, task_id: str, action: str | None = None, **body: Any) -> Any:
        base = f"/api/v1/channels/{CHANNEL}/tasks/"
        client = self.clients[who]
        if action is None:
            return ok(client.post(base, {"id": task_id, **body}, format="json"), 201)
        if action == "update":
            return ok(client.patch(f"{base}{task_id}/", body, format="json"))
        return ok(client.post(f"{base}{task_id}/{action}/", body, format="json"))

    def lock(self, who: str, *paths: str, seconds: float = 3600) -> str:
        url = f"/api/v1/channels/{CHANNEL}/locks/"
        sent = {"paths": list(paths), "lease_seconds": seconds}
        return ok(self.clients[who].post(url, sent, format="json"), 201)["lock_id"]

    def build(self) -> None:
        alice = self.clients["alice"]
        ok(
            alice.post(
                "/api/v1/channels/",
                {
                    "name": CHANNEL,
                    "topic": "  Payments API v2: schema — rollout ✓  ",
                    "members": ["carol", "alice", "bob"],
                },
                format="json",
            ),
            201,
        )
        self.post("alice", "Kickoff", "Hello all.\n\nPlan below.", to=["bob", "carol"])
        self.post("alice", "Decision: idempotency keys required", "Yes.\nKeys live 24h.")
        self.post("bob", "[decision] keep the v1 routes", "", status="discussion")
        self.post("carol", "schema notes", "Intro\n\n### Decision\nUse UUIDv7 ids.")
        self.post("alice", "Decision: use --- separators", "the real body")
        self.post("bob", "DECISION:   shouting works", "details\r\nwith CRLF\rand CR")
        self.clock.advance(1)
        self.post("carol", "Blocker: sandbox credentials missing", "Cannot test.\nSecond line.")
        self.post("dave", "need access", "waiting on ops", status="blocked")
        self.post("bob", "[blocker] flaky CI", "# Blocker\nsee logs")
        self.clock.advance(1)
        self.post("bob", "Verification: schema migration", "## Verification\n\n`make test` ok")
        self.post("carol", "evidence: load test", "p99 = 40 ms", status="verified")
        self.post("dave", "results", "## Evidence\nall green", status="discussion")
        self.post("alice", "test run", "no markers here", status="verified-by")
        self.forged("carol", "task.updated broken", "{not json", status="task.updated")

        self.task("alice", "T-OPEN", title="Write the runbook", files_hint=["docs/z.md", "a.md"],
                  acceptance=["reviewed by bob", "has a rollback section"])  # fmt: skip
        self.task("alice", "T-DONE", title="Design payments schema", acceptance=["migrates"])
        self.task("bob", "T-LEASED", title="Implement POST /payments", depends_on=["T-DONE"])
        self.task("alice", "T-EXPIRED", title="Load-test sandbox")
        self.task("alice", "T-RECOVERED", title="Fix the flaky test")
        self.task("alice", "T-BLOCKED", title="Rollout plan", depends_on=["T-LEASED", "T-DONE"])
        self.task("carol", "T-CANCELLED", title="Old idea", depends_on=["T-OPEN"])
        self.task("alice", "T-DONE2", title="Unleased completion", owner="carol")
        self.task("alice", "T-WAITING", title="Waits on two", depends_on=["T-OPEN", "T-BLOCKED"])

        self.task("bob", "T-DONE", "claim", lease_seconds=600)
        self.clock.advance(1)
        self.task("bob", "T-DONE", "done")
        self.task("carol", "T-LEASED", "claim", lease_seconds=3600)
        self.task("bob", "T-EXPIRED", "claim", lease_seconds=5)
        self.task("dave", "T-RECOVERED", "claim", lease_seconds=5)
        self.task("alice", "T-BLOCKED", "block")
        self.task("carol", "T-CANCELLED", "update", status="cancelled")
        self.task("carol", "T-DONE2", "update", status="in_progress")
        self.task("carol", "T-DONE2", "done")
        self.lock("carol", "api/payments.py", "api/schemas/")
        self.lock("bob", "docs/runbook.md", seconds=5)
        self.lock("dave", "src/**/*.py")
        self.clock.advance(30)  # the 5 s leases and lock expire
        self.task("alice", "T-RECOVERED", "recover", reason="dave left", lease_seconds=900)
        self.post("carol", "Re: Blocker", "# Blocker\ncredentials arrived?", reply_to=7)
        # An ordinary post labelled like a completion audit, after the real one: the reference
        # takes its sender for the one who verified T-DONE2.
        self.forged(
            "dave",
            "task.updated T-DONE2",
            json.dumps({"event": "task.updated", "status": "done", "task_id": "T-DONE2"}),
            status="task.updated",
        )


def as_imported(channel: str, seq: int, *, status: str) -> int:
    """Message #seq of ``channel`` made as an import of a folder stores a message whose file
    gives it ``status`` (an audit status a post may not take)."""
    message = Message.objects.select_related("channel").get(channel__name=channel, seq=seq)
    message.status, message.imported, message.sender_kind = status, True, "agent"
    message.json_size = message_json_size(message)
    message.save(update_fields=["status", "imported", "sender_kind", "json_size"])
    return seq


def imported_message(channel: Channel, seq: int, *, title: str, body: str, frontmatter, **fields):
    """A message as an import stores it (extra frontmatter keys kept verbatim)."""
    message = Message(
        id=f"imported-{seq}",
        channel=channel,
        seq=seq,
        sender=fields.pop("sender", "Alice Smith"),
        ts=fields.pop("ts", None) or Channel.objects.get(pk=channel.pk).created_at,
        title=title,
        body=body,
        frontmatter=frontmatter,
        **fields,
    )
    message.json_size = message_json_size(message)
    message.save(force_insert=True)
    Channel.objects.filter(pk=channel.pk).update(last_seq=max(seq, channel.last_seq))
    return message
