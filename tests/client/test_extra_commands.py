"""The registration the CLI calls: the three subcommands parse and dispatch."""

from __future__ import annotations

import argparse

from agentchat.client import extra_commands


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="agentchat")
    extra_commands.register(top.add_subparsers(dest="command", required=True))
    return top


def test_each_subcommand_parses_and_names_its_runner() -> None:
    options = parser().parse_args(["mcp", "--url", "http://x:1"])
    assert (options.run.__name__, options.url) == ("_mcp", "http://x:1")
    options = parser().parse_args(["hook", "stop", "--channel", "a", "--channel", "b"])
    assert (options.run.__name__, options.event, options.channel) == ("_hook", "stop", ["a", "b"])
    options = parser().parse_args(["guard", "install", "--channel", "w", "--warn"])
    assert (options.run.__name__, options.guard_command, options.warn) == (
        "_guard",
        "install",
        True,
    )
    assert options.fail_closed is None


def test_a_hook_through_the_registration_exits_0_with_no_server(capsys) -> None:
    options = parser().parse_args(["hook", "prompt", "--url", "http://127.0.0.1:9", "--token", "t"])
    assert options.run(options) == 0
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("agentchat hook: SERVER_UNREACHABLE")


def test_the_clis_own_url_flag_is_not_overwritten_by_a_subcommand() -> None:
    top = argparse.ArgumentParser(prog="agentchat")
    top.add_argument("--url")
    extra_commands.register(top.add_subparsers(dest="command", required=True))
    assert top.parse_args(["--url", "http://x:1", "hook", "stop"]).url == "http://x:1"
    assert top.parse_args(["guard", "check", "--url", "http://y:2"]).url == "http://y:2"


def test_the_clis_call_timeout_reaches_the_guard_and_the_mcp_server(monkeypatch, tmp_path) -> None:
    from agentchat.client import cli, guard, mcp_server

    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("AGENT_CHAT_CONFIG", "AGENT_CHAT_CALL_TIMEOUT", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    got: dict[str, object] = {}
    monkeypatch.setattr(guard, "check", lambda settings, **kw: got.update(guard=kw) or 0)
    monkeypatch.setattr(mcp_server, "run", lambda **kw: got.update(mcp=kw) or 0)
    assert cli.main(["--call-timeout", "3", "guard", "check", "--channel", "review"]) == 0
    assert cli.main(["--call-timeout", "4", "mcp"]) == 0
    assert got["guard"]["call_timeout"] == 3.0  # type: ignore[index]
    assert got["mcp"]["call_timeout"] == 4.0  # type: ignore[index]
