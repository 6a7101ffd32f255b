"""The client against a server it cannot trust (a fake answering what a test says): escape
sequences in every printed field are shown escaped, JSON of the wrong shape is BAD_RESPONSE,
an answer dripped a byte at a time ends at the call's deadline."""

from __future__ import annotations

import json
import re
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest

from agentchat.client import api, hooks, mcp_tools
from agentchat.client.api import Client
from agentchat.client.errors import ClientError
from agentchat.client.guard import Settings, check
from agentchat.client.safe import terminal
from tests.client.cli_run import Agentchat
from tests.client.fake_server import ENDLESS_CHUNK, fake_server

# Sets the window title, clears the screen, writes the clipboard; a C1 CSI; a right-to-left
# override; a zero-width space; a lone surrogate (a JSON \ud800 escape carries one).
H = "\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x9b31m\u202e\u200b\ud800"
UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060-\u2064"
    "\ufeff\u061c\ud800-\udfff]"
)
ESCAPED = r"\x1b]0;pwned\x07\x1b[2J\x1b]52;c;aGk=\x07\x9b31m\u202e\u200b\ud800"

MESSAGE = {
    "seq": 1,
    "id": "msg_" + "0" * 32,
    "channel": "review",
    "from": "bob" + H,
    "to": [],
    "title": "title" + H,
    "ts": "2026-01-01T00:00:00Z",
    "body": "line one\n\tline two " + H,
}
CHANNEL = {"name": "review", "topic": H, "members": ["bob" + H], "last_seq": 1}
TASK = {
    "id": "t1",
    "status": "open" + H,
    "channel": "review",
    "title": H,
    "owner": H,
    "created_by": H,
    "depends_on": [H],
    "files_hint": [H],
    "acceptance": [H],
    "branch": H,
    "updated_at": H,
    "lease_expires_at": H,
}
LOCK = {
    "lock_id": "b" * 32,
    "owner": H,
    "expires_at": H,
    "expired": False,
    "paths": [{"normalized_path": "a" + H, "display_path": "a" + H}],
}
ROUTES: dict[tuple[str, str], Any] = {
    ("GET", "me/"): {"name": "alice" + H},
    ("GET", "channels/"): {"channels": [CHANNEL], "more": False},
    ("GET", "channels/review/"): CHANNEL,
    ("GET", "channels/review/messages/"): {"messages": [MESSAGE], "cursor": 0, "more": False},
    ("POST", "channels/review/read/"): {"messages": [MESSAGE], "cursor": 1, "more": False},
    ("POST", "channels/review/messages/"): MESSAGE,
    ("GET", "channels/review/tasks/"): {"tasks": [TASK], "more": False},
    ("GET", "channels/review/tasks/t1/"): TASK,
    ("POST", "channels/review/locks/check/"): {"conflicts": [LOCK]},
    ("POST", "channels/review/locks/"): LOCK,
    ("GET", "channels/review/events/"): {
        "events": [{"seq": 1, "event": {"event": "status", "agent": H}}],
        "more": False,
    },
    ("POST", "channels/review/claims/task-1.md/"): {"owner": H},
    ("POST", "channels/"): (400, {"error": {"code": "INVALID_VALUE", "message": H}}),
}
COMMANDS = [
    ["channels"],
    ["roster", "review"],
    ["peek", "review"],
    ["read", "review"],
    ["read", "review", "--peek"],
    ["post", "review", "--title", "x", "--body", "y"],
    ["task", "list", "review"],
    ["task", "show", "review", "t1"],
    ["check", "review", "a"],
    ["lock", "review", "a"],
    ["event", "read", "review"],
    ["claim", "review", "task-1.md"],
    ["init", "evil"],
]


def safe_output(text: str) -> None:
    assert not UNSAFE.search(text), repr(text)


@pytest.fixture
def fake():
    with fake_server(ROUTES) as server:
        yield server


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda argv: " ".join(argv[:2]))
def test_every_printed_field_is_shown_escaped(fake, tmp_path: Path, argv: list[str]) -> None:
    result = Agentchat(fake.url, "t", tmp_path)(*argv)
    printed = result.stdout + result.stderr
    safe_output(printed)
    if argv[0] not in ("claim", "post"):  # (their lines show names as slugs: a-z, 0-9)
        assert r"\x1b]0;pwned" in printed or r"\u001b]0;pwned" in printed, printed


def test_a_body_keeps_its_newlines_and_tabs(fake, tmp_path: Path) -> None:
    out = Agentchat(fake.url, "t", tmp_path)("peek", "review").stdout
    assert "line one\n\tline two \\x1b]0;pwned" in out


@pytest.mark.parametrize(
    "argv, route",
    [
        (["roster", "review", "--json"], ("GET", "channels/review/")),
        (["task", "show", "review", "t1", "--json"], ("GET", "channels/review/tasks/t1/")),
        (["check", "review", "a", "--json"], ("POST", "channels/review/locks/check/")),
    ],
)
def test_json_output_is_the_servers_json_and_terminal_safe(
    fake, tmp_path: Path, argv: list[str], route: tuple[str, str]
) -> None:
    result = Agentchat(fake.url, "t", tmp_path)(*argv)
    assert result.returncode == 0, result.stderr
    safe_output(result.stdout)
    assert json.loads(result.stdout) == ROUTES[route]


def test_read_json_is_the_messages_as_sent(fake, tmp_path: Path) -> None:
    result = Agentchat(fake.url, "t", tmp_path)("read", "review", "--json")
    safe_output(result.stdout)
    assert json.loads(result.stdout)["messages"] == [MESSAGE]


def test_the_hook_lines_are_escaped(fake) -> None:
    listing = {"channels": [{"name": "x" + H, "unread": 2}], "more": False}
    fake.routes[("GET", "channels/")] = listing
    out, err = hooks.run_hook("prompt", url=fake.url, token="t")
    assert (out, err) == (f"2 unread in channel x{ESCAPED}\n", "")
    out, _ = hooks.run_hook("stop", url=fake.url, token="t")
    safe_output(out)
    assert json.loads(out) == {"systemMessage": f"2 unread in channel x{ESCAPED}"}


@pytest.fixture
def staged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with ``a`` staged, as the current folder; no config file."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "a").write_text("x")
    subprocess.run(["git", "-C", str(repo), "add", "a"], check=True)
    monkeypatch.chdir(repo)
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("AGENT_CHAT_CONFIG", "AGENT_CHAT_URL", "AGENT_CHAT_TOKEN", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    return repo


def test_the_guard_shows_hostile_owners_and_paths_escaped(fake, staged, capsys) -> None:
    fake.routes[("GET", "me/")] = {"name": "alice"}
    settings = Settings(channel="review", warn=False, fail_closed=False)
    assert check(settings, url=fake.url, token="t") == 1
    err = capsys.readouterr().err
    safe_output(err)
    assert f"locked by {ESCAPED} until {ESCAPED}" in err


# --- answers of the wrong shape -------------------------------------------------------------

SHAPES = [
    (["roster", "review"], ("GET", "channels/review/"), ["a list"]),
    (["channels"], ("GET", "channels/"), {"channels": "none"}),
    (["peek", "review"], ("GET", "channels/review/messages/"), {"messages": [{"seq": "1"}]}),
    (["read", "review"], ("POST", "channels/review/read/"), {"messages": []}),
    (["read", "review"], ("GET", "me/"), {"name": 5}),
    (["post", "review", "--title", "x", "--body", "y"], ("POST", "channels/review/messages/"), {}),
    (["task", "list", "review"], ("GET", "channels/review/tasks/"), {"tasks": [1]}),
    (["task", "show", "review", "t1"], ("GET", "channels/review/tasks/t1/"), {"status": "x"}),
    (["lock", "review", "a"], ("POST", "channels/review/locks/"), {**LOCK, "paths": "a"}),
    (["check", "review", "a"], ("POST", "channels/review/locks/check/"), {"conflicts": {}}),
    (
        ["event", "read", "review"],
        ("GET", "channels/review/events/"),
        {"events": [{"seq": 1, "event": []}]},
    ),
    (["claim", "review", "task-1.md"], ("POST", "channels/review/claims/task-1.md/"), {"o": 1}),
    (["compact", "review"], ("POST", "channels/review/compact/"), {"open_tasks_count": "1"}),
    # The Markdown summary answered as JSON (an object where text is asked for).
    (["state", "review"], ("GET", "channels/review/state/"), {"summary": "x"}),
    (
        ["unlock", "review", "src/a"],  # a path that can be no lock id: no id is tried
        ("DELETE", "channels/review/locks/"),
        [{"lock_id": "x"}],
    ),
]


@pytest.mark.parametrize("argv, route, body", SHAPES, ids=lambda v: str(v)[:30])
def test_an_answer_of_the_wrong_shape_is_bad_response(
    fake, tmp_path: Path, argv: list[str], route: tuple[str, str], body: Any
) -> None:
    fake.routes[route] = body
    result = Agentchat(fake.url, "t", tmp_path)(*argv)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert result.stderr.startswith("agentchat: BAD_RESPONSE: "), result.stderr
    assert result.stderr.count("\n") == 1


def test_mcp_tools_answer_bad_response_for_the_wrong_shape(fake) -> None:
    fake.routes[("POST", "channels/review/read/")] = {"messages": "none", "cursor": 1}
    fake.routes[("GET", "channels/review/tasks/")] = {"tasks": None}
    with Client(fake.url, "t") as client:
        for tool, args in (("read", {"channel": "review"}), ("task_list", {"channel": "review"})):
            with pytest.raises(ClientError) as caught:
                mcp_tools.TOOLS_BY_NAME[tool].call(client, args)
            assert caught.value.code == "BAD_RESPONSE"


def test_pages_that_never_move_on_are_bad_response(fake, tmp_path: Path) -> None:
    fake.routes[("GET", "channels/")] = {"channels": [], "more": True, "next": None}
    result = Agentchat(fake.url, "t", tmp_path)("channels")
    assert result.stderr.startswith("agentchat: BAD_RESPONSE: "), result.stderr


# --- a server that drips its answer ---------------------------------------------------------

PADDED = {**CHANNEL, "topic": "x" * 4000}  # dripped whole, it would take 800 s


def test_the_cli_gives_up_a_dripping_server_at_the_calls_deadline(tmp_path: Path) -> None:
    with fake_server({("GET", "channels/review/"): PADDED}) as fake:
        fake.drip = True
        # A child process: the hang guard is its timeout.
        run = Agentchat(fake.url, "t", tmp_path)
        result = run.subprocess("--call-timeout", "1", "roster", "review", timeout=60)
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("agentchat: SERVER_TIMEOUT: "), result.stderr
    assert "within 1 s" in result.stderr


@pytest.mark.parametrize("fail_closed, exit_code", [(False, 0), (True, 1)])
def test_the_guard_applies_its_rule_to_a_dripping_server(
    staged, capsys, monkeypatch: pytest.MonkeyPatch, fail_closed: bool, exit_code: int
) -> None:
    monkeypatch.setenv("AGENT_CHAT_CALL_TIMEOUT", "1")
    with fake_server({("GET", "me/"): {"name": "alice", "pad": "x" * 4000}}) as fake:
        fake.drip = True
        got: list[int] = []
        settings = Settings(channel="review", warn=False, fail_closed=fail_closed)
        worker = threading.Thread(
            target=lambda: got.append(check(settings, url=fake.url, token="t")), daemon=True
        )
        worker.start()
        worker.join(60)  # a hang guard only
        assert not worker.is_alive()
    assert got == [exit_code]
    err = capsys.readouterr().err
    assert "SERVER_TIMEOUT" in err
    assert ("fail-closed" if fail_closed else "fail-open") in err


def test_terminal_escapes_only_what_a_terminal_acts_on() -> None:
    assert terminal("a\tb\nc\\d é ✓") == "a\tb\nc\\d é ✓"
    assert terminal("a\tb\n", keep="") == "a\\x09b\\x0a"
    assert terminal("\x1b\x7f\x85\u2028\u2066\ufeff\u061c") == (
        "\\x1b\\x7f\\x85\\u2028\\u2066\\ufeff\\u061c"
    )
    text = json.dumps({"k": "\x85\u202e\x1b"}, ensure_ascii=False)
    assert json.loads(terminal(text, as_json=True)) == {"k": "\x85\u202e\x1b"}


def test_a_run_of_calls_past_its_shared_deadline_sends_nothing(fake) -> None:
    # The guard's check gives all its requests one deadline (Client.until).
    with Client(fake.url, "t") as client:
        assert client.request("GET", "me/")["name"].startswith("alice")
        client.until = 0.0  # long past
        with pytest.raises(ClientError) as caught:
            client.request("GET", "me/")
    assert caught.value.code == "SERVER_TIMEOUT"
    assert fake.seen == [("GET", "/api/v1/me/")]


# --- a server that never ends its answer ----------------------------------------------------


def test_an_endless_answer_is_refused_at_the_size_cap(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cap = 4 * 1024 * 1024
    monkeypatch.setattr(api, "MAX_ANSWER_BYTES", cap, raising=False)
    with fake_server() as fake:
        fake.endless = True
        got: list[Any] = []
        run = Agentchat(fake.url, "t", tmp_path)
        worker = threading.Thread(
            target=lambda: got.append(run("--call-timeout", "3", "channels")), daemon=True
        )
        worker.start()
        worker.join(60)  # a hang guard only
        assert not worker.is_alive()
        sent = fake.sent
    [result] = got
    assert result.returncode == 1, result.stderr
    assert result.stderr.startswith("agentchat: RESPONSE_TOO_LARGE: "), result.stderr
    # What the server could write: the cap, one chunk, and what the sockets' buffers hold.
    assert sent <= cap + ENDLESS_CHUNK + 8 * 1024 * 1024


def test_a_wait_refuses_a_too_large_frame_and_ends_at_its_deadline() -> None:
    """A frame past the client's cap (its header says 300 MB, its payload never ends) drops
    the connection, which the wait mends as any other: it subscribes again (with backoff) and
    ends at its deadline, having read no more than the cap of any connection's frame."""
    from websockets.sync.server import serve

    from agentchat.client import ops

    connections: list[int] = []
    stop = threading.Event()

    def endless_frame(ws: Any) -> None:
        connections.append(0)
        ws.socket.sendall(b"\x81\x7f" + (300 * 1024 * 1024).to_bytes(8, "big"))
        while not stop.is_set():
            try:
                ws.socket.sendall(b"x" * ENDLESS_CHUNK)
            except OSError:  # the client dropped the connection
                return
            connections[-1] += ENDLESS_CHUNK

    routes = {("GET", "channels/review/messages/"): {"messages": [], "cursor": 0, "more": False}}
    with fake_server(routes) as fake, serve(endless_frame, "127.0.0.1", 0) as ws_server:
        threading.Thread(target=ws_server.serve_forever, daemon=True).start()
        port = ws_server.socket.getsockname()[1]
        got: list[BaseException] = []

        def wait() -> None:
            with Client(fake.url, "t") as client:
                client.ws_url = lambda path: f"ws://127.0.0.1:{port}{path}"  # type: ignore[method-assign]
                try:
                    ops.wait_found(client, "review", "bob", timeout=2)
                except BaseException as exc:  # the test inspects it
                    got.append(exc)

        worker = threading.Thread(target=wait, daemon=True)
        worker.start()
        worker.join(60)  # a hang guard only
        stop.set()
        ws_server.shutdown()
        assert not worker.is_alive()
    assert [type(exc) for exc in got] == [ops.WaitTimeout]
    assert len(connections) >= 2  # dropped and subscribed again
    # No connection was read past the cap (bar what the sockets' buffers hold).
    assert max(connections) <= ops.WS_MAX_FRAME + 8 * 1024 * 1024


# --- the MCP server between a hostile server and an agent ------------------------------------


def _mcp_params(url: str, home: Path) -> Any:
    import os
    import sys

    from mcp import StdioServerParameters

    root = Path(__file__).resolve().parents[2]
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(home), "PYTHONPATH": str(root)}
    env |= {"AGENT_CHAT_URL": url, "AGENT_CHAT_TOKEN": "t", "AGENT_CHAT_CALL_TIMEOUT": "5"}
    return StdioServerParameters(
        command=sys.executable, args=["-m", "agentchat.client.mcp_server"], env=env, cwd=root
    )


def _replaced(value: Any) -> Any:
    """The server's data as structured content carries it: lone surrogates as U+FFFD."""
    return json.loads(json.dumps(value).replace("\\ud800", "\\ufffd"))


async def test_the_mcp_server_shows_hostile_text_escaped_and_survives_lone_surrogates(
    fake, tmp_path: Path
) -> None:
    """Through the official SDK client: every text the agent reads (a result's JSON text, an
    error's line, a resource's text, name and description) has no raw control, bidi control,
    invisible character or lone surrogate; structured content is the server's data, a lone
    surrogate (which no UTF-8 can carry, and which killed the server) as U+FFFD."""
    import anyio
    import mcp_types as types
    from mcp import Client as McpClient
    from mcp.shared.exceptions import MCPError

    conflict = {"code": "TASK_CONFLICT", "message": H, "detail": {"k": H}}
    fake.routes[("GET", "channels/review/tasks/t2/")] = (409, {"error": conflict})
    texts: list[str] = []
    with anyio.fail_after(60):  # a hang guard only
        async with McpClient(_mcp_params(fake.url, tmp_path)) as client:
            for tool, args, route in (
                ("peek", {"channel": "review"}, ("GET", "channels/review/messages/")),
                ("read", {"channel": "review"}, ("POST", "channels/review/read/")),
                (
                    "task_show",
                    {"channel": "review", "id": "t1"},
                    ("GET", "channels/review/tasks/t1/"),
                ),
                ("channels", {}, ("GET", "channels/")),
            ):
                result = await client.call_tool(tool, args)
                assert result.is_error is not True, result
                [content] = result.content
                assert isinstance(content, types.TextContent)
                texts.append(content.text)
                assert json.loads(content.text) == ROUTES[route]  # the same JSON, escaped
                assert result.structured_content == _replaced(ROUTES[route])
            failed = await client.call_tool("task_show", {"channel": "review", "id": "t2"})
            assert failed.is_error is True
            [content] = failed.content
            assert isinstance(content, types.TextContent)
            assert content.text == f"TASK_CONFLICT: {ESCAPED}"
            assert failed.structured_content == {"error": _replaced(conflict)}
            listed = (await client.list_resources()).resources
            texts += [f"{r.name} {r.description}" for r in listed]
            assert f"channel review: {ESCAPED}" in [r.description for r in listed]
            read = await client.read_resource("agentchat://channels/review")
            [contents] = read.contents
            assert isinstance(contents, types.TextResourceContents)
            texts.append(contents.text)
            assert json.loads(contents.text)["channel"] == CHANNEL
            fake.routes[("GET", "channels/review/")] = (404, {"error": {**conflict, "code": H}})
            with pytest.raises(MCPError) as caught:
                await client.read_resource("agentchat://channels/review")
            texts.append(str(caught.value))
            assert ESCAPED in str(caught.value)
            alive = await client.call_tool("peek", {"channel": "review"})
            assert alive.is_error is not True
    for text in texts:
        safe_output(text)


def test_an_argument_no_utf8_can_carry_is_invalid_text_and_never_sent(fake) -> None:
    with Client(fake.url, "t") as client:
        for call in (
            lambda: client.request("GET", "channels/" + api.seg("re\udcffv") + "/"),
            lambda: client.request("GET", "channels/", params={"q": "\ud800"}),
        ):
            with pytest.raises(ClientError) as caught:
                call()
            assert caught.value.code == "INVALID_TEXT"
    assert fake.seen == []
