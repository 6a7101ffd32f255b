"""The git guard in a real repository: another agent's lock refuses the commit, warn mode lets
it through, an unreachable server fails open (or closed when asked)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from agentchat.client.api import Client
from agentchat.client.guard import MARKER, literal

ROOT = Path(__file__).resolve().parents[2]


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    env = {"PATH": os.environ.get("PATH", ""), "HOME": str(tmp_path)}
    assert run(["git", "init", "-q", "-b", "main"], path, env).returncode == 0
    (path / "src").mkdir()
    (path / "src" / "a.py").write_text("a = 1\n")
    (path / "notes.md").write_text("notes\n")
    assert run(["git", "add", "-A"], path, env).returncode == 0
    return path


@pytest.fixture
def world(live: Any, make_agent: Any, repo: Path, tmp_path: Path) -> dict[str, Any]:
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob")}
    with Client(live.url, tokens["bob"]) as bob:
        bob.request("POST", "channels/", json={"name": "work"})
        lock = bob.request(
            "POST", "channels/work/locks/", json={"paths": ["src/"], "lease_seconds": 600}
        )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(tmp_path),
        "PYTHONPATH": str(ROOT),
        "AGENT_CHAT_URL": live.url,
        "AGENT_CHAT_TOKEN": tokens["alice"],
        "GIT_AUTHOR_NAME": "alice",
        "GIT_AUTHOR_EMAIL": "alice@example.invalid",
        "GIT_COMMITTER_NAME": "alice",
        "GIT_COMMITTER_EMAIL": "alice@example.invalid",
    }
    return {"url": live.url, "tokens": tokens, "env": env, "repo": repo, "lock": lock}


def guard(world: dict[str, Any], *args: str, env: dict[str, str] | None = None) -> Any:
    return run(
        [sys.executable, "-m", "agentchat.client.guard", *args],
        world["repo"],
        env or world["env"],
    )


def commit(world: dict[str, Any], env: dict[str, str] | None = None) -> Any:
    return run(["git", "commit", "-q", "-m", "change"], world["repo"], env or world["env"])


def head(world: dict[str, Any]) -> int:
    done = run(["git", "rev-list", "--count", "--all"], world["repo"], world["env"])
    return int(done.stdout.strip() or 0)


def test_a_lock_held_by_another_agent_refuses_the_commit(world: dict[str, Any]) -> None:
    installed = guard(world, "install", "--channel", "work")
    assert installed.returncode == 0, installed.stderr
    hook = world["repo"] / ".git" / "hooks" / "pre-commit"
    assert MARKER in hook.read_text()
    done = commit(world)
    assert done.returncode != 0
    assert "refusing the commit" in done.stderr
    assert f"src/ locked by bob until {world['lock']['expires_at']}" in done.stderr
    assert world["lock"]["lock_id"] in done.stderr
    assert "advisory" in done.stderr
    assert head(world) == 0  # nothing was committed


def test_paths_outside_the_lock_and_own_locks_commit(world: dict[str, Any]) -> None:
    assert guard(world, "install", "--channel", "work").returncode == 0
    env = world["env"]
    assert run(["git", "reset", "-q", "src"], world["repo"], env).returncode == 0
    with Client(world["url"], world["tokens"]["alice"]) as alice:
        alice.request("POST", "channels/work/locks/", json={"paths": ["notes.md"]})
    done = commit(world)
    assert done.returncode == 0, done.stderr
    assert head(world) == 1


def test_warn_mode_commits_and_says_who_holds_the_lock(world: dict[str, Any]) -> None:
    assert guard(world, "install", "--channel", "work", "--warn").returncode == 0
    done = commit(world)
    assert done.returncode == 0, done.stderr
    assert "warning: staged paths are locked" in done.stderr
    assert "src/ locked by bob" in done.stderr
    assert head(world) == 1


def free_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_server_down_fails_open_with_a_message(world: dict[str, Any]) -> None:
    assert guard(world, "install", "--channel", "work").returncode == 0
    env = {**world["env"], "AGENT_CHAT_URL": free_url()}
    done = commit(world, env)
    assert done.returncode == 0, done.stderr
    assert "SERVER_UNREACHABLE" in done.stderr
    assert "committing anyway (fail-open)" in done.stderr
    assert head(world) == 1


def test_server_down_fails_closed_when_installed_so(world: dict[str, Any]) -> None:
    assert guard(world, "install", "--channel", "work", "--fail-closed").returncode == 0
    env = {**world["env"], "AGENT_CHAT_URL": free_url()}
    done = commit(world, env)
    assert done.returncode != 0
    assert "refusing the commit (fail-closed)" in done.stderr
    assert head(world) == 0


def test_install_leaves_a_foreign_hook_alone(world: dict[str, Any]) -> None:
    hook = world["repo"] / ".git" / "hooks" / "pre-commit"
    hook.write_text("#!/bin/sh\necho mine\n")
    done = guard(world, "install", "--channel", "work")
    assert done.returncode == 1
    assert "is not the guard's" in done.stderr
    assert hook.read_text() == "#!/bin/sh\necho mine\n"


def test_install_needs_a_channel(world: dict[str, Any]) -> None:
    done = guard(world, "install")
    assert done.returncode == 2
    assert "no channel" in done.stderr


def test_file_names_with_glob_characters_are_checked_literally() -> None:
    assert literal("docs/a[1]*?.md") == "docs/a[[]1[]][*][?].md"


def test_install_from_a_subfolder_writes_the_repositorys_hook(world: dict[str, Any]) -> None:
    # `git rev-parse --git-path hooks` is relative to the cwd, not to the top folder.
    sub = world["repo"] / "a" / "b"
    sub.mkdir(parents=True)
    done = run(
        [sys.executable, "-m", "agentchat.client.guard", "install", "--channel", "work"],
        sub,
        world["env"],
    )
    assert done.returncode == 0, done.stderr
    hook = world["repo"] / ".git" / "hooks" / "pre-commit"
    assert MARKER in hook.read_text()
    assert str(hook) in done.stdout
    assert not (world["repo"].parent / ".git").exists()
    assert commit(world).returncode != 0  # the hook runs: bob's lock refuses the commit


def test_install_from_a_subfolder_respects_core_hooks_path(world: dict[str, Any]) -> None:
    env = world["env"]
    assert run(["git", "config", "core.hooksPath", "githooks"], world["repo"], env).returncode == 0
    sub = world["repo"] / "src"
    done = run(
        [sys.executable, "-m", "agentchat.client.guard", "install", "--channel", "work"], sub, env
    )
    assert done.returncode == 0, done.stderr
    assert MARKER in (world["repo"] / "githooks" / "pre-commit").read_text()
    assert not (sub / "githooks").exists()


class OddServer(BaseHTTPRequestHandler):
    """Answers every request as ``self.server.answer`` says: (status, headers, body)."""

    def do_GET(self) -> None:
        status, headers, body = self.server.answer  # type: ignore[attr-defined]
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def odd_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), OddServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()
    thread.join()


ODD_ANSWERS = {
    "redirect": (302, {"Location": "/login/"}, b""),
    "html": (200, {"Content-Type": "text/html"}, b"<html>a login page</html>"),
}


@pytest.mark.parametrize("answer", sorted(ODD_ANSWERS))
@pytest.mark.parametrize("closed", [False, True])
def test_an_answer_that_is_not_the_servers_is_cannot_check(
    world: dict[str, Any], odd_server: ThreadingHTTPServer, answer: str, closed: bool
) -> None:
    odd_server.answer = ODD_ANSWERS[answer]  # type: ignore[attr-defined]
    flags = ["--fail-closed"] if closed else []
    assert guard(world, "install", "--channel", "work", *flags).returncode == 0
    url = f"http://127.0.0.1:{odd_server.server_address[1]}"
    done = commit(world, {**world["env"], "AGENT_CHAT_URL": url})
    assert "Traceback" not in done.stderr
    assert "cannot check path locks in channel 'work': BAD_RESPONSE" in done.stderr
    if closed:
        assert done.returncode != 0 and "refusing the commit (fail-closed)" in done.stderr
        assert head(world) == 0
    else:
        assert done.returncode == 0 and "committing anyway (fail-open)" in done.stderr
        assert head(world) == 1


def test_an_unexpected_exception_is_cannot_check(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from agentchat.client import guard as guard_module

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise KeyError("conflicts")

    monkeypatch.chdir(world["repo"])
    monkeypatch.setattr(guard_module, "conflicts_of", broken)
    settings = guard_module.Settings(channel="work", warn=False, fail_closed=True)
    token = world["tokens"]["alice"]
    assert guard_module.check(settings, url=world["url"], token=token) == 1
    assert "unexpected KeyError" in capsys.readouterr().err
    settings = guard_module.Settings(channel="work", warn=False, fail_closed=False)
    assert guard_module.check(settings, url=world["url"], token=token) == 0
    assert "committing anyway (fail-open)" in capsys.readouterr().err


def test_a_file_name_that_is_not_utf8_is_skipped_and_the_rest_still_checked(
    world: dict[str, Any],
) -> None:
    # git gives the name as bytes; the client cannot send it (INVALID_TEXT), which used to
    # abandon the whole check and, fail-open, let the locked src/a.py through unchecked.
    repo = world["repo"]
    with open(os.path.join(os.fsencode(repo), b"caf\xe9.txt"), "wb") as odd:
        odd.write(b"latin-1\n")
    env = world["env"]
    assert run(["git", "add", "-A"], repo, env).returncode == 0
    assert guard(world, "install", "--channel", "work").returncode == 0
    done = commit(world)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "caf\\xe9.txt: not checked (the file name is not UTF-8" in done.stderr
    assert "src/ locked by bob" in done.stderr
    assert "refusing the commit" in done.stderr
    assert head(world) == 0
