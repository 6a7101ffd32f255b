"""``agentchat`` against a live server process: every command, its output lines, its exit codes,
bodies from stdin, ``--json`` parsed."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.client.cli_run import Agentchat
from tests.signals import wait_until


@pytest.fixture
def cli(live, make_agent, tmp_path):
    """``cli("alice")`` -> an ``Agentchat`` of a new agent alice (with a token) on the server."""

    def make(name: str) -> Agentchat:
        _, token = make_agent(name)
        return Agentchat(live.url, token, tmp_path)

    return make


@pytest.fixture
def alice(cli):
    run = cli("alice")
    assert run("init", "review", "--topic", "schema v2").returncode == 0
    return run


def ok(result):
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def fails(result, code: str, exit_code: int):
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"agentchat: {code}: "), result.stderr
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    return result.stderr


def test_init_channels_and_roster(cli, live):
    alice = cli("alice")
    assert ok(alice("channels")) == f"(no channels yet on {live.url})\n"
    assert ok(alice("init", "review", "--members", "alice, bob", "--topic", "t")) == (
        f"created channel 'review' at {live.url}/c/review/  members=alice, bob\n"
    )
    assert ok(alice("init", "open-one")).endswith("members=(open)\n")
    fails(alice("init", "review"), "CHANNEL_EXISTS", 1)
    ok(
        alice(
            "post",
            "review",
            "--title",
            "A title that is longer than forty characters!",
            "--body",
            "x",
        )
    )
    assert ok(alice("channels")) == (
        "CHANNEL   MSGS  MEMBERS / LAST\n"
        "open-one     0  (open)\n"
        "                last: -\n"
        "review       1  alice, bob\n"
        "                last: #1 alice: A title that is longer than forty cha...\n"
    )
    assert ok(alice("roster", "review")) == (
        "channel : review\ntopic   : t\nmembers : alice, bob\nmessages: 1\n"
    )
    listed = json.loads(ok(alice("channels", "--json")))
    assert [c["name"] for c in listed["channels"]] == ["open-one", "review"]
    assert json.loads(ok(alice("roster", "review", "--json")))["topic"] == "t"


def test_post_read_and_the_cursor(alice, cli):
    bob = cli("bob")
    assert ok(alice("post", "review", "--to", "bob", "--title", "Schema v0.2", "--body", "hi")) == (
        "posted #1 -> review/0001-alice-schema-v0-2.md\n"
    )
    ok(alice("post", "review", "--to", "carol", "--title", "not for bob", "--body", "x"))
    ok(bob("post", "review", "--title", "own", "--body", "x"))
    out = ok(bob("read", "review"))
    blocks = out.split("=" * 70 + "\n")[1:]
    assert len(blocks) == 1
    ts = json.loads(ok(bob("peek", "review", "-n", "3", "--json")))["messages"][0]["ts"]
    assert blocks[0] == (
        "---\nseq: 1\nfrom: alice\nto: bob\nchannel: review\n"
        f"ts: {ts}\nstatus: discussion\ntitle: Schema v0.2\n---\nhi\n\n"
    )
    # The cursor moved past everything: nothing new, and the line names the cursor it found.
    assert ok(bob("read", "review", "--as", "bob")) == (
        "(no new messages for bob in 'review'; cursor at #3)\n"
    )
    # --all shows the whole thread, own messages too; --peek keeps the cursor.
    assert ok(bob("read", "review", "--all", "--peek")).count("=" * 70) == 3
    ok(alice("post", "review", "--title", "later", "--body", "x"))
    assert ok(bob("read", "review", "--peek")).count("=" * 70) == 1
    body = json.loads(ok(bob("read", "review", "--json")))
    assert [m["seq"] for m in body["messages"]] == [4]
    assert body["cursor"] == 4 and body["more"] is False
    # --all without --peek shows everything and moves the cursor to the top.
    ok(alice("post", "review", "--to", "carol", "--title", "not for bob", "--body", "x"))
    assert ok(bob("read", "review", "--all")).count("=" * 70) == 5
    assert json.loads(ok(bob("roster", "review", "--json")))["cursor"] == 5


def test_read_follows_the_servers_pages(alice, cli, live):
    bob = cli("bob")
    for i in range(3):
        ok(alice("post", "review", "--title", f"m{i}", input="x" * 400_000))
    # The server answers about 1 MiB per page: three pages, all printed, the cursor at 3.
    out = ok(bob("read", "review"))
    assert out.count("=" * 70) == 3
    assert json.loads(ok(bob("peek", "review", "-n", "1", "--json")))["messages"][0]["seq"] == 3
    assert "cursor at #3" in ok(bob("read", "review"))


def test_post_bodies_from_stdin_and_files(alice, tmp_path):
    ok(alice("post", "review", "--title", "piped", input="line 1\nline 2\n\n"))
    ok(alice("post", "review", "--title", "dash", "--body-file", "-", input="from dash"))
    path = tmp_path / "body.md"
    path.write_text("# from a file\n", encoding="utf-8")
    ok(alice("post", "review", "--title", "file", "--body-file", str(path)))
    empty = tmp_path / "empty.md"
    empty.write_text("")
    ok(alice("post", "review", "--title", "empty file", "--body-file", str(empty)))
    bodies = [
        m["body"] for m in json.loads(ok(alice("peek", "review", "-n", "4", "--json")))["messages"]
    ]
    assert bodies == ["line 1\nline 2\n\n", "from dash", "# from a file\n", ""]
    fails(alice("post", "review", "--title", "none", input="  \n"), "BODY_EMPTY", 1)
    fails(
        alice("post", "review", "--title", "x", "--body-file", str(tmp_path / "no")),
        "BODY_UNREADABLE",
        1,
    )
    bad = tmp_path / "bad.md"
    bad.write_bytes(b"\xff\xfe")
    fails(alice("post", "review", "--title", "x", "--body-file", str(bad)), "BODY_UNREADABLE", 1)
    assert json.loads(ok(alice("peek", "review", "-n", "9", "--json")))["messages"][-1]["seq"] == 4


def test_post_options(alice, cli):
    ok(alice("post", "review", "--title", "root", "--body", "x"))
    answer = json.loads(
        ok(
            alice(
                "post",
                "review",
                "--title",
                "re",
                "--body",
                "y",
                "--to",
                "bob,carol",
                "--reply",
                "1",
                "--status",
                "ack",
                "--json",
            )
        )
    )
    assert (answer["to"], answer["reply_to"], answer["status"]) == (["bob", "carol"], 1, "ack")
    fails(
        alice("post", "review", "--title", "x", "--body", "y", "--from", "bob"),
        "SENDER_MISMATCH",
        1,
    )
    ok(alice("post", "review", "--title", "x", "--body", "y", "--from", "alice"))
    fails(alice("post", "nope", "--title", "x", "--body", "y"), "CHANNEL_NOT_FOUND", 1)
    usage = alice("post", "review", "--body", "y")  # --title missing
    assert usage.returncode == 2 and "--title" in usage.stderr


def test_peek(alice):
    assert ok(alice("peek", "review")) == "(channel 'review' is empty)\n"
    for i in range(5):
        ok(alice("post", "review", "--title", f"m{i}", "--body", "x"))
    assert ok(alice("peek", "review")).count("=" * 70) == 3
    assert "title: m4" in ok(alice("peek", "review", "-n", "1"))
    assert ok(alice("peek", "review", "-n", "0")) == ""
    seqs = [
        m["seq"]
        for m in json.loads(ok(alice("peek", "review", "-n", "2000", "--json")))["messages"]
    ]
    assert seqs == [1, 2, 3, 4, 5]
    fails(alice("peek", "nope"), "CHANNEL_NOT_FOUND", 1)


def test_marker_claims_first_wins_later_exit_3(alice, cli):
    bob = cli("bob")
    assert (
        ok(bob("claim", "review", "task-12.md")) == "claimed task-12.md -> task-12.CLAIMED-bob.md\n"
    )
    err = fails(
        alice("claim", "review", "task-12.md", "--as", "alice"), "MARKER_ALREADY_CLAIMED", 3
    )
    assert "bob" in err
    fails(bob("claim", "review", "task-12.md"), "MARKER_ALREADY_CLAIMED", 3)
    fails(bob("claim", "review", "notes.txt"), "INVALID_NAME", 1)
    fails(bob("claim", "review", "task-13.md", "--as", "alice"), "SENDER_MISMATCH", 1)


def test_task_commands_and_their_codes(alice, cli):
    bob = cli("bob")
    assert (
        ok(alice("task", "create", "review", "T1", "--title", "base")) == "created task T1 [open]\n"
    )
    assert (
        ok(
            alice(
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
                "src/a.py,src/b.py",
                "--acceptance",
                "tests pass",
                "--branch",
                "feat",
            )
        )
        == "created task T2 [open]\n"
    )
    fails(
        alice("task", "create", "review", "T3", "--from", "bob", "--title", "x"),
        "SENDER_MISMATCH",
        1,
    )
    fails(alice("task", "create", "review", "T1", "--title", "again"), "TASK_ALREADY_EXISTS", 2)
    fails(alice("task", "create", "review", "T4"), "TASK_INVALID_ARGUMENT", 2)
    fails(alice("task", "frobnicate", "review"), "TASK_INVALID_COMMAND", 2)
    fails(
        alice("task", "claim", "review", "T1", "--lease-seconds", "abc"), "TASK_INVALID_ARGUMENT", 2
    )
    listing = ok(alice("task", "list", "review"))
    assert listing.splitlines() == [
        "ID  STATUS  OWNER  DEPENDS_ON  TITLE",
        "T1  open    -      -           base",
        "T2  open    -      T1          next",
    ]
    show = ok(alice("task", "show", "review", "T2")).splitlines()
    assert show[:10] == [
        "id: T2",
        "channel: review",
        "title: next",
        "status: open",
        "owner: -",
        "created_by: alice",
        "depends_on: T1",
        "dependencies: blocked (T1=open)",
        "files_hint: src/a.py, src/b.py",
        "acceptance: tests pass",
    ]
    assert show[10:12] == ["lease_expires_at: -", "branch: feat"]
    fails(bob("task", "claim", "review", "T2"), "TASK_DEPENDENCY_NOT_READY", 2)
    assert (
        ok(bob("task", "claim", "review", "T1", "--ttl", "60")) == "claimed task T1 [in_progress]\n"
    )
    fails(alice("task", "claim", "review", "T1"), "LEASE_CONFLICT", 2)
    fails(alice("task", "renew", "review", "T1"), "LEASE_OWNER_MISMATCH", 2)
    assert (
        ok(bob("task", "renew", "review", "T1", "--lease", "120"))
        == "renewed task T1 [in_progress]\n"
    )
    fails(
        bob("task", "claim", "review", "T2", "--lease-seconds", "nan"), "LEASE_INVALID_DURATION", 2
    )
    fails(
        bob("task", "renew", "review", "T1", "--lease-seconds", "inf"), "LEASE_INVALID_DURATION", 2
    )
    fails(bob("task", "update", "review", "T1", "--status", "open"), "LEASE_MUTATION_REQUIRED", 2)
    fails(bob("task", "update", "review", "T1"), "TASK_INVALID_UPDATE", 2)
    assert (
        ok(bob("task", "update", "review", "T1", "--title", "base!"))
        == "updated task T1 [in_progress]\n"
    )
    fails(
        bob("task", "update", "review", "T1", "--as", "alice", "--title", "x"), "SENDER_MISMATCH", 1
    )
    assert ok(bob("task", "done", "review", "T1")) == "done task T1 [done]\n"
    assert "dependencies: ready" in ok(alice("task", "show", "review", "T2"))
    assert ok(alice("task", "block", "review", "T2")) == "blocked task T2 [blocked]\n"
    assert (
        ok(alice("task", "release", "review", "T2", "--as", "alice")) == "released task T2 [open]\n"
    )
    fails(alice("task", "recover", "review", "T2", "--reason", "stale"), "LEASE_NOT_FOUND", 2)
    fails(alice("task", "recover-pending", "review"), "LEASE_TRANSACTION_NOT_FOUND", 2)
    fails(alice("task", "show", "review", "nope"), "TASK_NOT_FOUND", 2)
    fails(alice("task", "list", "nope"), "CHANNEL_NOT_FOUND", 1)
    tasks = json.loads(ok(alice("task", "list", "review", "--json")))["tasks"]
    assert [(t["id"], t["status"]) for t in tasks] == [("T1", "done"), ("T2", "open")]
    assert json.loads(ok(alice("task", "show", "review", "T2", "--json")))["ready"] is True


def test_fence_check_exits_0_when_current_and_5_otherwise(alice, cli):
    bob = cli("bob")
    ok(alice("task", "create", "review", "T1", "--title", "t"))
    # The reference's lines stay as they are: a holder reads its fence from --json.
    assert json.loads(ok(bob("task", "claim", "review", "T1", "--json")))["fence"] == 1
    assert ok(alice("fence", "check", "review", "--task", "T1", "--fence", "1")) == (
        "current fence=1 current=1 owner=bob\n"
    )
    stale = alice("fence", "check", "review", "--task", "T1", "--fence", "0", "--json")
    assert stale.returncode == 5, (stale.stdout, stale.stderr)
    assert json.loads(stale.stdout)["state"] == "stale"
    fails(bob("task", "done", "review", "T1", "--fence", "0"), "STALE_FENCE", 1)
    ok(bob("task", "done", "review", "T1", "--fence", "1"))
    assert alice("fence", "check", "review", "--task", "T1", "--fence", "1").returncode == 5
    assert json.loads(ok(alice("lock", "review", "src/", "--json")))["fence"] == 1
    assert ok(alice("fence", "check", "review", "--lock", "src", "--fence", "1")).startswith(
        "current fence=1"
    )
    fails(alice("unlock", "review", "src", "--fence", "7"), "STALE_FENCE", 1)
    for hostile in ("x", "\u0661", "-1", " 1"):
        refused = alice("fence", "check", "review", "--task", "T1", "--fence", hostile)
        assert refused.returncode == 2 and "not a fence" in refused.stderr, refused.stderr


def past(expires_at: str) -> None:
    """Until the server's clock (this machine's) is past the instant it answered as an
    expiry: the short leases below must have expired, however fast the commands run."""
    moment = datetime.fromisoformat(expires_at)
    wait_until(lambda: datetime.now(UTC) > moment, what=f"past {expires_at}")


def test_task_recover_after_expiry(alice, cli):
    bob = cli("bob")
    ok(alice("task", "create", "review", "T1", "--title", "t"))
    ok(bob("task", "claim", "review", "T1", "--lease-seconds", "0.05"))
    shown = json.loads(ok(alice("task", "show", "review", "T1", "--json")))
    past(shown["lease"]["lease_expires_at"])
    fails(alice("task", "claim", "review", "T1"), "LEASE_RECOVERY_REQUIRED", 2)
    assert ok(alice("task", "recover", "review", "T1", "--reason", "stale session")) == (
        "recovered task T1 [in_progress]\n"
    )
    lease = json.loads(ok(alice("task", "show", "review", "T1", "--json")))["lease"]
    assert (lease["owner"], lease["previous_owner"], lease["recovery_reason"]) == (
        "alice",
        "bob",
        "stale session",
    )


def test_path_lock_commands(alice, cli):
    bob = cli("bob")
    locked = ok(alice("lock", "review", "src/", "./docs//a.md", "--lease-seconds", "60"))
    lock_id = locked.split()[1]
    assert locked == f"locked {lock_id} -> review/src, docs/a.md\n"
    fails(bob("lock", "review", "src/main.py"), "PATH_LOCK_CONFLICT", 1)
    fails(bob("lock", "review", "../x"), "PATH_LOCK_INVALID_PATH", 1)
    fails(bob("lock", "review", "x", "--as", "alice"), "SENDER_MISMATCH", 1)
    checked = ok(bob("check", "review", "src/main.py"))
    assert checked.startswith(f"locked {lock_id} owner=alice expires=")
    assert ok(bob("check", "review", "lib/x.py")) == "available\n"
    assert (
        json.loads(ok(bob("check", "review", "src", "--json")))["conflicts"][0]["lock_id"]
        == lock_id
    )
    fails(bob("unlock", "review", lock_id), "PATH_LOCK_OWNER_MISMATCH", 1)
    fails(bob("recover", "review", lock_id, "--reason", "x"), "PATH_LOCK_NOT_STALE", 1)
    assert ok(alice("unlock", "review", "docs/a.md")) == f"unlocked {lock_id} from review\n"
    fails(alice("unlock", "review", lock_id), "PATH_LOCK_NOT_FOUND", 1)
    second = ok(bob("lock", "review", "lib", "--ttl", "0.05")).split()[1]
    past(json.loads(ok(alice("check", "review", "lib", "--json")))["conflicts"][0]["expires_at"])
    fails(alice("lock", "review", "lib/a"), "PATH_LOCK_RECOVERY_REQUIRED", 1)
    assert ok(alice("recover", "review", "lib", "--reason", "stale", "--lease", "30")) == (
        f"recovered {second} for alice previous_owner=bob reason=stale\n"
    )
    assert ok(alice("unlock", "review", second, "--owner", "alice")) == (
        f"unlocked {second} from review\n"
    )
    assert ok(alice("recover-pending", "review")) == (
        "recovered pending path-lock transaction in review\n"
    )


def test_state_and_compact(alice):
    ok(alice("post", "review", "--title", "Decision: use JSON", "--body", "because"))
    ok(alice("task", "create", "review", "T1", "--title", "t"))
    markdown = ok(alice("state", "review"))
    assert markdown.startswith("# State: review\n") and "use JSON" in markdown
    summary = json.loads(ok(alice("state", "review", "--json", "--strict")))
    assert summary["channel"] == "review" and len(summary["decisions"]) == 1
    assert ok(alice("compact", "review", "--as", "alice")) == (
        "compacted state for review -> review/state.md (open_tasks=1, locks=0, decisions=1)\n"
    )
    assert ok(alice("state", "review", "--write")) == (
        "compacted state for review -> review/state.md\n"
    )
    compacted = json.loads(ok(alice("compact", "review", "--json")))
    assert compacted["compacted_by"] == "alice"
    fails(alice("compact", "review", "--no-audit"), "USAGE", 2)
    fails(alice("state", "review", "--as", "bob"), "SENDER_MISMATCH", 1)
    fails(alice("state", "nope"), "CHANNEL_NOT_FOUND", 1)


def test_events(alice):
    assert ok(alice("event", "post", "review", "--type", "capability", "--harness", "omp")) == (
        "posted event capability -> review\n"
    )
    ok(
        alice(
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
        )
    )
    fails(
        alice(
            "event",
            "post",
            "review",
            "--type",
            "capability",
            "--harness",
            "omp",
            "--primitives",
            "messages,bogus",
        ),
        "EVENT_UNKNOWN_PRIMITIVE",
        2,
    )
    fails(
        alice("event", "post", "review", "--type", "capability", "--harness", "a/b"),
        "EVENT_INVALID_TEXT",
        2,
    )
    lines = ok(alice("event", "read", "review")).splitlines()
    assert [json.loads(line)["event"] for line in lines] == ["capability", "status"]
    assert lines[1].startswith('{"agent": "alice", "detail": "on T1", "event": "status"')
    assert len(ok(alice("event", "read", "review", "--type", "status")).splitlines()) == 1
    assert len(json.loads(ok(alice("event", "read", "review", "--json")))["events"]) == 2


def test_configuration_errors_say_what_to_do(live, tmp_path, cli):
    nobody = Agentchat(live.url, None, tmp_path)
    err = fails(nobody("channels"), "AUTH_REQUIRED", 1)
    assert "create_agent_token" in err
    bad = Agentchat(live.url, "not-a-token", tmp_path)
    assert "create_agent_token" in fails(bad("channels"), "AUTH_INVALID", 1)
    down = Agentchat("http://127.0.0.1:9", "t", tmp_path)
    err = fails(down("channels"), "SERVER_UNREACHABLE", 1)
    assert "http://127.0.0.1:9" in err and "make run" in err
    assert "agentchat init" in fails(cli("alice")("read", "nope"), "CHANNEL_NOT_FOUND", 1)


def test_the_config_file_gives_url_and_token(live, make_agent, tmp_path):
    _, token = make_agent("carol")
    (tmp_path / ".config" / "agentchat").mkdir(parents=True)
    (tmp_path / ".config" / "agentchat" / "config.toml").write_text(
        f'url = "{live.url}"\ntoken = "{token}"\n'
    )
    run = Agentchat(None, None, tmp_path)  # neither URL nor token in the environment
    assert ok(run("init", "from-config")).startswith(f"created channel 'from-config' at {live.url}")
    (tmp_path / ".config" / "agentchat" / "config.toml").write_text("tokn = 'x'\n")
    err = fails(run("channels"), "CONFIG_INVALID", 1)
    assert "config.toml: unknown key 'tokn'" in err


def test_usage_errors_exit_2(alice):
    assert alice().returncode == 2
    assert alice("read").returncode == 2
    assert alice("peek", "review", "-n", "x").returncode == 2
    assert alice("event", "post", "review", "--type", "other", "--harness", "h").returncode == 2
    assert alice("lock", "review", "a", "--ttl", "x").returncode == 2


def test_the_console_script_is_installed():
    # The set-up (`make`'s venv stamp) installs the project: the command is on the venv's PATH.
    script = Path(sys.prefix) / "bin" / "agentchat"
    assert script.is_file()
    assert "agentchat.client.cli" in script.read_text()


def test_hostile_arguments_get_a_code_and_no_traceback(alice):
    import subprocess

    cases = [
        (["read", "a/b"], 1),
        (["read", "../review"], 1),
        (["post", "review", "--title", "two\nlines", "--body", "x"], 1),
        (["task", "create", "review", "bad id", "--title", "x"], 2),
        (["lock", "review", "C:/x"], 1),
        (["lock", "review", "a", "--ttl", "-1"], 1),
        (["task", "claim", "review", "x", "--lease-seconds", "1e999"], 2),
    ]
    for argv, exit_code in cases:
        result = alice(*argv)
        assert result.returncode == exit_code, (argv, result.stderr)
        assert result.stderr.startswith("agentchat: ") and "Traceback" not in result.stderr
        assert result.stderr.count("\n") == 1, (argv, result.stderr)
    # Bytes that are no UTF-8 on the command line (a lone surrogate in Python) are never sent.
    env = alice.env()
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentchat.client.cli",
            "post",
            "review",
            b"--title",
            b"\xff",
            "--body",
            "x",
        ],
        env=env,
        capture_output=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.startswith(b"agentchat: INVALID_TEXT: ")
    assert json.loads(ok(alice("peek", "review", "--json")))["messages"] == []


def test_read_json_prints_the_pages_read_before_a_later_page_fails(capsys):
    """Each page of a read moves the cursor as it is answered: a failing later page must not
    swallow the pages before it (printed with more: true, then the error is raised)."""
    import argparse

    from agentchat.client.errors import ClientError
    from agentchat.client.verbs import messages as cli_module

    page = {"messages": [{"seq": 1, "from": "bob", "to": []}], "cursor": 1, "more": True}

    class SecondPageFails:
        reads = 0

        def request(self, method, path, **kwargs):
            if path == "me/":
                return {"name": "alice"}
            if path.endswith("messages/"):
                return {"messages": [], "cursor": 0, "more": False}
            self.reads += 1
            if self.reads == 1:
                return page
            raise ClientError("SERVER_UNREACHABLE", "the server went away")

    args = argparse.Namespace(channel="review", agent=None, all=False, peek=False, json=True)
    with pytest.raises(ClientError):
        cli_module.cmd_read(SecondPageFails(), args)
    printed = json.loads(capsys.readouterr().out)
    assert printed == {"messages": page["messages"], "cursor": 1, "more": True}


def test_escapes_from_the_server_are_shown_escaped(cli, live):
    """A body and a topic holding terminal escapes print escaped through peek, read and
    roster; --json parses to what was posted. A body keeps them as text; the API refuses them
    in a topic (one line, like a title) but a folder's import keeps what the reference CLI
    wrote, so the topic is stored here as an import would. Titles refuse both on the server:
    the fake server's tests cover a hostile title."""
    from agentchat.client.api import Client
    from channels_app.models import Channel

    escapes = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x9b"
    escapes_shown = r"\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x9b"
    hostile = escapes + "\u202e"
    shown = escapes_shown + r"\u202e"
    alice = cli("alice")
    bob = cli("bob")
    with Client(live.url, alice.token) as client:
        client.request("POST", "channels/", json={"name": "evil"})
        Channel.objects.filter(name="evil").update(topic="t" + escapes)
        posted = {"title": "title", "body": "one\n\ttwo " + hostile}
        client.request("POST", "channels/evil/messages/", json=posted)
    for argv, expected in (
        (["peek", "evil"], shown),
        (["read", "evil", "--as", "bob"], shown),
        (["roster", "evil"], escapes_shown),
    ):
        out = ok(bob(*argv))
        assert "\x1b" not in out and "\u202e" not in out and "\x9b" not in out, (argv, out)
        assert expected in out, (argv, out)
    assert "one\n\ttwo " + shown in ok(bob("peek", "evil"))
    printed = ok(bob("peek", "evil", "--json"))
    assert "\x1b" not in printed and "\u202e" not in printed
    [message] = json.loads(printed)["messages"]
    assert (message["title"], message["body"]) == (posted["title"], posted["body"])


def test_the_console_script_runs_as_a_child_process(alice):
    # The other tests run main() in this process; this one runs it as a shell would.
    result = alice.subprocess("roster", "review")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("channel : review\ntopic   : schema v2\n")
    result = alice.subprocess("roster", "nowhere")
    assert result.returncode == 1
    assert result.stderr.startswith("agentchat: CHANNEL_NOT_FOUND: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["--json", "--url", "http://u", "--call-timeout", "2", "peek", "review"],
        ["peek", "review", "--json", "--url", "http://u", "--call-timeout", "2"],
        ["--url", "http://u", "peek", "review", "--call-timeout", "2", "--json"],
        ["--json", "task", "list", "review", "--url", "http://u", "--call-timeout", "2"],
    ],
)
def test_the_global_flags_go_before_or_after_the_command(argv):
    from agentchat.client.cli import build_parser

    args = build_parser().parse_args(argv)
    assert (args.json, args.url, args.call_timeout, args.token) == (True, "http://u", 2.0, None)


def test_a_command_without_the_global_flags_keeps_their_defaults():
    from agentchat.client.cli import build_parser

    args = build_parser().parse_args(["peek", "review"])
    assert (args.json, args.url, args.call_timeout, args.token) == (False, None, None, None)
