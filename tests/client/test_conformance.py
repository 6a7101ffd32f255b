"""One scenario run twice, through the reference CLI on a temporary folder and through
``agentchat`` on a live server, with the very same arguments (identity flags included): the
observable results must agree — exit codes, error codes, the lines printed (who gets which
message, claim winners, task transitions, lock conflicts), the audit trail the agents read,
and every agent's cursor at the end.

Only what cannot be equal is normalized: timestamps, lock ids (random in both), where a
channel lives (a folder or a URL) and the JSON bodies of audit messages (their keys and times
are the reference's, tested where they are written).
"""

from __future__ import annotations

import json
import re

import pytest

from tests.client.cli_run import Agentchat
from tests.reference import ref, require_reference

TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)")
LOCK_ID = re.compile(r"\b[0-9a-f]{32}\b")
CODE = re.compile(r"^agent-?chat: ([A-Z][A-Z0-9_]+): ", re.MULTILINE)

AGENTS = ("alice", "bob", "carol")

# (agent, argv). "{lock}" is the lock id the scenario's first lock got in that run.
SCENARIO: list[tuple[str, list[str]]] = [
    ("alice", ["init", "review", "--members", "alice,bob,carol", "--topic", "schema v2"]),
    (
        "alice",
        ["post", "review", "--from", "alice", "--to", "bob", "--title", "For bob", "--body", "b1"],
    ),
    ("alice", ["post", "review", "--from", "alice", "--title", "For all", "--body", "b2\n\n"]),
    (
        "carol",
        [
            "post",
            "review",
            "--from",
            "carol",
            "--to",
            "alice",
            "--title",
            "Re: all",
            "--reply",
            "2",
            "--status",
            "ack",
            "--body",
            "  b3",
        ],
    ),
    ("bob", ["peek", "review", "-n", "2"]),
    ("bob", ["read", "review", "--as", "bob"]),
    ("bob", ["read", "review", "--as", "bob"]),
    ("carol", ["read", "review", "--as", "carol", "--peek"]),
    ("carol", ["read", "review", "--as", "carol", "--all", "--peek"]),
    ("alice", ["wait", "review", "--as", "alice", "--timeout", "0"]),
    ("alice", ["wait", "review", "--as", "alice", "--timeout", "0"]),
    ("bob", ["claim", "review", "task-1.md", "--as", "bob"]),
    ("carol", ["claim", "review", "task-1.md", "--as", "carol"]),
    (
        "alice",
        [
            "task",
            "create",
            "review",
            "T1",
            "--from",
            "alice",
            "--title",
            "base",
            "--acceptance",
            "tests pass,docs",
        ],
    ),
    (
        "alice",
        [
            "task",
            "create",
            "review",
            "T2",
            "--created-by",
            "alice",
            "--title",
            "next",
            "--depends-on",
            "T1",
            "--files-hint",
            "src/a.py",
        ],
    ),
    ("alice", ["task", "create", "review", "T1", "--from", "alice", "--title", "again"]),
    ("bob", ["task", "claim", "review", "T2", "--as", "bob"]),
    ("bob", ["task", "claim", "review", "T1", "--as", "bob", "--lease-seconds", "600"]),
    ("carol", ["task", "claim", "review", "T1", "--as", "carol"]),
    ("carol", ["task", "renew", "review", "T1", "--as", "carol", "--ttl", "60"]),
    ("bob", ["task", "renew", "review", "T1", "--as", "bob", "--lease", "900"]),
    ("bob", ["task", "update", "review", "T1", "--as", "bob", "--status", "open"]),
    ("bob", ["task", "update", "review", "T1", "--as", "bob", "--title", "base!"]),
    ("bob", ["task", "block", "review", "T1", "--as", "bob"]),
    ("bob", ["task", "done", "review", "T1", "--as", "bob"]),
    ("alice", ["task", "show", "review", "T2"]),
    ("alice", ["task", "update", "review", "T2", "--as", "alice", "--status", "done"]),
    ("alice", ["task", "block", "review", "T2", "--as", "alice"]),
    ("alice", ["task", "release", "review", "T2", "--as", "alice"]),
    ("alice", ["task", "recover", "review", "T2", "--as", "alice", "--reason", "stale"]),
    ("alice", ["task", "show", "review", "T404"]),
    ("alice", ["task", "list", "review"]),
    (
        "alice",
        ["lock", "review", "src/", "./docs//a.md", "--as", "alice", "--lease-seconds", "600"],
    ),
    ("bob", ["lock", "review", "src/main.py", "--as", "bob"]),
    ("bob", ["lock", "review", "../etc", "--as", "bob"]),
    ("bob", ["check", "review", "src/main.py", "lib"]),
    ("bob", ["check", "review", "lib"]),
    ("bob", ["unlock", "review", "{lock}", "--as", "bob"]),
    ("bob", ["recover", "review", "{lock}", "--as", "bob", "--reason", "stale"]),
    # By path, and which refusal wins: the reason, then the target, then its state.
    ("bob", ["recover", "review", "nothing/here", "--as", "bob", "--reason", ""]),
    ("bob", ["recover", "review", "src", "--as", "bob", "--reason", ""]),
    ("bob", ["recover", "review", "src", "--as", "bob", "--reason", "x", "--ttl", "nan"]),
    ("bob", ["recover", "review", "nothing/here", "--as", "bob", "--reason", "x"]),
    ("bob", ["recover", "review", "../x", "--as", "bob", "--reason", "x"]),
    ("bob", ["recover", "review", "recover", "--as", "bob", "--reason", "x"]),
    ("bob", ["unlock", "review", "src", "--as", "bob"]),
    ("bob", ["unlock", "review", "nothing/here", "--as", "bob"]),
    ("bob", ["unlock", "review", "../x", "--as", "bob"]),
    ("bob", ["unlock", "review", "check", "--as", "bob"]),
    ("alice", ["unlock", "review", "docs/a.md", "--as", "alice"]),
    ("alice", ["unlock", "review", "{lock}", "--as", "alice"]),
    ("bob", ["check", "review", "src"]),
    (
        "alice",
        [
            "event",
            "post",
            "review",
            "--from",
            "alice",
            "--type",
            "status",
            "--harness",
            "omp",
            "--status",
            "busy",
            "--detail",
            "on T1",
        ],
    ),
    (
        "alice",
        [
            "event",
            "post",
            "review",
            "--from",
            "alice",
            "--type",
            "capability",
            "--harness",
            "omp",
            "--primitives",
            "messages,wait",
        ],
    ),
    (
        "alice",
        [
            "event",
            "post",
            "review",
            "--from",
            "alice",
            "--type",
            "capability",
            "--harness",
            "omp",
            "--primitives",
            "bogus",
        ],
    ),
    ("alice", ["event", "read", "review", "--type", "status"]),
    ("bob", ["read", "review", "--as", "bob"]),
    ("carol", ["read", "review", "--as", "carol"]),
    ("alice", ["post", "nope", "--from", "alice", "--title", "x", "--body", "y"]),
]


class Normalizer:
    """One run's spellings made comparable: its lock ids numbered in order of appearance."""

    def __init__(self) -> None:
        self.locks: dict[str, str] = {}

    def __call__(self, text: str) -> str:
        text = TS.sub("<ts>", text)
        return LOCK_ID.sub(
            lambda m: self.locks.setdefault(m.group(0), f"<lock{len(self.locks)}>"), text
        )


def blocks(stdout: str) -> list[str]:
    """Printed messages, each without its ts line and with an audit's JSON body dropped."""
    out = []
    for block in stdout.split("=" * 70 + "\n")[1:]:
        head, _, body = block.partition("\n---\n")
        lines = [line for line in head.splitlines() if not line.startswith("ts: ")]
        out.append("\n".join(lines) + "\n---\n" + ("<json>" if body.startswith("{") else body))
    return out


def observe(step: list[str], result: tuple[int, str, str], norm: Normalizer) -> dict[str, object]:
    code, stdout, stderr = result
    seen: dict[str, object] = {"exit": code}
    errors = CODE.findall(stderr)
    if code and errors:
        seen["code"] = errors[0]
    if step[0] == "init":
        return seen  # a folder path or a URL
    if step[0] in ("read", "wait", "peek") and "=" * 70 in stdout:
        seen["messages"] = [norm(b) for b in blocks(stdout)]
    elif step[0] == "event" and step[1] == "read":
        seen["events"] = [
            {k: v for k, v in json.loads(line).items() if k != "ts"} for line in stdout.splitlines()
        ]
    else:
        seen["stdout"] = norm(stdout)
    if step[0] == "wait" and code == 2:
        seen["stderr"] = stderr
    return seen


def run_scenario(run) -> list[dict[str, object]]:
    norm = Normalizer()
    lock = ""
    seen = []
    for agent, step in SCENARIO:
        argv = [arg.replace("{lock}", lock) for arg in step]
        result = run(agent, argv)
        if argv[0] == "lock" and result[0] == 0 and not lock:
            lock = result[1].split()[1]
        seen.append({"step": " ".join([agent, *step]), **observe(argv, result, norm)})
    return seen


@pytest.fixture
def server_run(live, make_agent, tmp_path):
    tokens = {name: make_agent(name)[1] for name in AGENTS}

    def run(agent: str, argv: list[str]) -> tuple[int, str, str]:
        result = Agentchat(live.url, tokens[agent], tmp_path)(*argv)
        return result.returncode, result.stdout, result.stderr

    return run, Agentchat(live.url, tokens["alice"], tmp_path), tokens


def test_the_reference_and_agentchat_agree(server_run, tmp_path):
    require_reference()
    root = tmp_path / "root"

    def run_ref(agent: str, argv: list[str]) -> tuple[int, str, str]:
        result = ref(root, *argv, check=False)
        if argv[0] == "init":
            (root / "review" / "task-1.md").write_text("a marker\n")  # the reference claims files
        return result.returncode, result.stdout, result.stderr

    expected = run_scenario(run_ref)
    # The scenario is not vacuous: what the reference did, in a few of its steps.
    by_step = {entry["step"]: entry for entry in expected}
    assert len(expected[5]["messages"]) == 2 and "messages" not in expected[6]
    assert by_step["carol claim review task-1.md --as carol"]["exit"] == 3
    assert by_step["carol task claim review T1 --as carol"]["code"] == "LEASE_CONFLICT"
    assert by_step["bob lock review src/main.py --as bob"]["code"] == "PATH_LOCK_CONFLICT"
    assert len(expected[-3]["messages"]) >= 8  # bob reads the audit trail of tasks and locks
    run, admin, tokens = server_run
    got = run_scenario(run)
    assert len(got) == len(expected)
    for want, have in zip(expected, got, strict=True):
        if "code" not in want:  # one of the reference's plain errors: its exit status says it
            have.pop("code", None)
        assert have == want
    # Every agent's cursor ended where the reference left it.
    ref_cursors = {
        name: int((root / "review" / ".cursors" / f"{name}.txt").read_text())
        for name in AGENTS
        if (root / "review" / ".cursors" / f"{name}.txt").exists()
    }
    server_cursors = {}
    for name in AGENTS:
        body = Agentchat(admin.url, tokens[name], tmp_path)("roster", "review", "--json")
        server_cursors[name] = json.loads(body.stdout)["cursor"]
    assert {n: ref_cursors.get(n, 0) for n in AGENTS} == server_cursors
