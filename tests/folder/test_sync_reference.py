"""A synced folder read by the reference CLI itself (``agent-chat-plugin`` 0.7.5): a scenario
built through our REST API, synced, then the reference's ``peek``, ``read --as`` (on a copy: it
moves cursors), ``task list``, ``task show``, ``check`` and ``event read`` report what our API
reports, and its conformance script (``verify_root.py --strict``) passes.

The reference runs as ``tests.reference`` finds it (skipped without it, failing under CI).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentchat.folder.sync import folder_sync
from tests.reference import REF_PYTHON, VERIFY_ROOT, ref, require_reference

pytestmark = pytest.mark.django_db

SEPARATOR = "=" * 70


@pytest.fixture(autouse=True)
def reference_installed() -> None:
    require_reference()


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.content
    return response.json()


@pytest.fixture
def synced(api_for, tmp_path: Path) -> dict[str, Any]:
    """The scenario, synced into ``tmp_path / "root"``; the API clients by name."""
    alice, bob, carol = api_for("alice"), api_for("bob"), api_for("carol")
    ok(
        alice.post(
            "/api/v1/channels/",
            {"name": "review", "members": ["alice", "bob", "carol"], "topic": "Schéma ✓ review"},
            format="json",
        ),
        201,
    )

    def post(client: Any, **body: Any) -> None:
        ok(client.post("/api/v1/channels/review/messages/", body, format="json"), 201)

    post(alice, title="Kickoff: schema v0.2 ✓ — Ünïcode & emoji 🚀", body="Let's go.\n\n- a\n- b")
    post(bob, title="Re: Kickoff", body="Looks good", to="alice", reply_to=1)
    post(carol, title='Title: with "quotes" and colon', body="to two", to=["alice", "bob"])
    post(alice, title="directed # to carol", body="  leading kept", to="carol")
    post(bob, title="!!!", body="a title that slugs to nothing")
    post(alice, title="decision: use uuids", body="Decided.", status="decision")

    def task(client: Any, task_id: str, action: str | None = None, **body: Any) -> None:
        url = f"/api/v1/channels/review/tasks/{task_id}/{action}/" if action else None
        if action is None:
            ok(client.post("/api/v1/channels/review/tasks/", {"id": task_id, **body},
                           format="json"), 201)  # fmt: skip
        elif action == "update":
            ok(client.patch(f"/api/v1/channels/review/tasks/{task_id}/", body, format="json"))
        else:
            ok(client.post(url, body, format="json"))

    task(alice, "T-1", title="Design the schema", acceptance=["reviewed"], files_hint=["db/s.sql"])
    task(alice, "T-2", title="Implement ✓ it", depends_on=["T-1"])
    task(alice, "T-3", title="Roll out", depends_on=["T-1", "T-2"])
    task(alice, "T-4", title="Load test")
    task(alice, "T-5", title="Dropped idea")
    task(bob, "T-1", "claim", lease_seconds=600)
    task(bob, "T-1", "done")
    task(carol, "T-2", "claim", lease_seconds=3600)
    task(alice, "T-3", "block")
    task(alice, "T-5", "update", status="cancelled")
    task(bob, "T-4", "claim", lease_seconds=1200)

    lock = ok(
        carol.post("/api/v1/channels/review/locks/", {"paths": ["src/app.py", "docs"]},
                   format="json"), 201)  # fmt: skip
    gone = ok(bob.post("/api/v1/channels/review/locks/", {"paths": ["tests/x.py"]},
                       format="json"), 201)  # fmt: skip
    ok(bob.delete(f"/api/v1/channels/review/locks/{gone['lock_id']}/"))

    ok(alice.post("/api/v1/channels/review/events/",
                  {"type": "capability", "harness": "claude-code",
                   "primitives": ["messages", "cursors", "wait"]}, format="json"), 201)  # fmt: skip
    ok(bob.post("/api/v1/channels/review/events/",
                {"type": "status", "harness": "codex", "status": "busy", "detail": "on T-4 ☕"},
                format="json"), 201)  # fmt: skip

    ok(bob.post("/api/v1/channels/review/read/"))  # bob's cursor: the max so far
    ok(carol.post("/api/v1/channels/review/ack/", {"seq": 3}, format="json"))
    post(alice, title="for bob", body="new since your read", to="bob")
    post(carol, title="for alice only", body="not for bob", to="alice")
    post(carol, title="for everyone", body="all of you")

    root = tmp_path / "root"
    folder_sync(root=root)
    return {"root": root, "alice": alice, "bob": bob, "carol": carol, "lock": lock}


def parse_file_text(text: str) -> dict[str, Any]:
    """A message as the reference prints it (its file's text): the frontmatter and body."""
    lines = text.split("\n")
    assert lines[0] == "---", text
    end = lines.index("---", 1)
    front = dict(line.split(": ", 1) if ": " in line else (line.rstrip(":"), "")
                 for line in lines[1:end])  # fmt: skip
    return {**front, "body": "\n".join(lines[end + 1 :]).strip()}


def printed_messages(stdout: str) -> list[dict[str, Any]]:
    blocks = [b.strip("\n") for b in stdout.split(SEPARATOR + "\n") if b.strip()]
    return [parse_file_text(block) for block in blocks]


def as_printed(message: dict[str, Any]) -> dict[str, Any]:
    """What the reference should print of one of our API's messages."""
    front = {
        "seq": str(message["seq"]),
        "from": message["from"],
        "to": ",".join(message["to"]) or "all",
        "channel": message["channel"],
        "ts": message["ts"],
        "status": message["status"] or "discussion",
        "title": re.sub(r"[\r\n]+", " ", message["title"]),
    }
    if message["reply_to"] is not None:
        front["reply_to"] = str(message["reply_to"])
    return {**front, "body": message["body"].strip()}


def api_messages(client: Any) -> list[dict[str, Any]]:
    return ok(client.get("/api/v1/channels/review/messages/", {"after": 0, "limit": 1000}))[
        "messages"
    ]


def test_verify_root_strict_passes_on_the_synced_root(synced: dict[str, Any]) -> None:
    result = subprocess.run(
        [str(REF_PYTHON), str(VERIFY_ROOT), str(synced["root"]), "--strict"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.rstrip().endswith("ALL OK 0")
    assert "FAIL" not in result.stdout


def test_peek_prints_the_messages_our_api_returns(synced: dict[str, Any]) -> None:
    ours = api_messages(synced["alice"])
    printed = printed_messages(ref(synced["root"], "peek", "review", "-n", "1000").stdout)
    assert printed == [as_printed(m) for m in ours]
    assert len(printed) == ours[-1]["seq"]


def test_read_as_bob_on_a_copy_reads_what_our_read_returns(
    synced: dict[str, Any], tmp_path: Path
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(synced["root"], copy, symlinks=True)
    printed = printed_messages(ref(copy, "read", "review", "--as", "bob").stdout)
    ours = ok(synced["bob"].post("/api/v1/channels/review/read/"))
    assert printed == [as_printed(m) for m in ours["messages"]]
    assert [m["title"] for m in ours["messages"]] == ["for bob", "for everyone"]
    assert (copy / "review" / ".cursors" / "bob.txt").read_text() == str(ours["cursor"])
    # carol's cursor (an ack) is honoured too
    carol_printed = printed_messages(ref(copy, "read", "review", "--as", "carol").stdout)
    carol_ours = ok(synced["carol"].post("/api/v1/channels/review/read/"))["messages"]
    assert carol_printed == [as_printed(m) for m in carol_ours]


def test_task_list_and_show_report_our_tasks(synced: dict[str, Any]) -> None:
    tasks = ok(synced["alice"].get("/api/v1/channels/review/tasks/"))["tasks"]
    assert {t["id"]: t["status"] for t in tasks} == {
        "T-1": "done",
        "T-2": "in_progress",
        "T-3": "blocked",
        "T-4": "in_progress",
        "T-5": "cancelled",
    }
    lines = ref(synced["root"], "task", "list", "review").stdout.splitlines()
    assert re.split(r"\s+", lines[0].strip()) == ["ID", "STATUS", "OWNER", "DEPENDS_ON", "TITLE"]
    rows = [re.split(r"\s{2,}", line.strip(), maxsplit=4) for line in lines[1:]]
    assert rows == [
        [t["id"], t["status"], t["owner"] or "-", ", ".join(t["depends_on"]) or "-", t["title"]]
        for t in tasks
    ]
    record_fields = (
        "id", "channel", "title", "status", "owner", "created_by", "depends_on", "files_hint",
        "acceptance", "lease_expires_at", "branch", "updated_at",
    )  # fmt: skip
    for t in tasks:
        shown = dict(
            line.split(": ", 1)
            for line in ref(synced["root"], "task", "show", "review", t["id"]).stdout.splitlines()
        )
        expected = {
            key: ", ".join(t[key]) or "-" if isinstance(t[key], list) else t[key] or "-"
            for key in record_fields
        }
        assert {key: shown[key] for key in record_fields} == expected, t["id"]
        assert (shown["dependencies"] == "ready") == t["ready"], (t["id"], shown)


def test_check_reports_our_locks(synced: dict[str, Any]) -> None:
    for path in ("src/app.py", "docs/guide.md", "tests/x.py", "free.txt"):
        ours = ok(
            synced["alice"].post(
                "/api/v1/channels/review/locks/check/", {"paths": [path]}, format="json"
            )
        )["conflicts"]
        printed = ref(synced["root"], "check", "review", path).stdout.splitlines()
        expected = [
            f"locked {c['lock_id']} owner={c['owner']} expires={c['expires_at']}" for c in ours
        ] or ["available"]
        assert printed == expected, path
    assert synced["lock"]["lock_id"] in ref(synced["root"], "check", "review", "docs").stdout


def test_event_read_reports_our_events(synced: dict[str, Any]) -> None:
    ours = ok(synced["alice"].get("/api/v1/channels/review/events/"))["events"]
    printed = ref(synced["root"], "event", "read", "review").stdout.splitlines()
    assert [json.loads(line) for line in printed] == [item["event"] for item in ours]
    assert len(printed) == 2
    statuses = ref(synced["root"], "event", "read", "review", "--type", "status").stdout
    assert [json.loads(line)["detail"] for line in statuses.splitlines()] == ["on T-4 ☕"]


def test_channels_and_roster_read_the_meta(synced: dict[str, Any]) -> None:
    roster = ref(synced["root"], "roster", "review").stdout
    assert "alice" in roster and "carol" in roster
    assert "review" in ref(synced["root"], "channels").stdout
