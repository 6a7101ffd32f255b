"""``agentchat hook session-start|prompt|stop``: inbox notices for a coding agent's host.

Each prints "N unread in channel X" for the channels with unread relevant messages (the
``--channel`` ones, else the config file's ``channel``, else every channel the agent sees),
from one HTTP call (``GET channels/``, or ``GET channels/<name>/`` for one channel) that
moves no cursor. ``session-start`` and ``prompt`` print plain lines (hosts such as Claude Code
add a hook's stdout to the agent's context); ``stop`` prints the host's JSON,
``{"systemMessage": "..."}``, and nothing when nothing is unread. A hook never fails its
host: whatever happens (no server, a bad token, a timeout) it prints one ``agentchat hook:``
line on stderr, nothing on stdout, and exits 0, within ``--timeout`` seconds (default 2).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Sequence
from typing import Any

from agentchat.client import shapes
from agentchat.client.api import Client, seg
from agentchat.client.config import config_load, connection_arguments
from agentchat.client.errors import ClientError, one_line
from agentchat.client.safe import line, terminal

EVENTS = ("session-start", "prompt", "stop")
DEFAULT_TIMEOUT = 2.0
ENV_TIMEOUT = "AGENT_CHAT_HOOK_TIMEOUT"


def unread_counts(client: Client, channels: Sequence[str], timeout: float) -> list[tuple[str, int]]:
    """(channel, unread) for the channels asked (every visible one when none), one request."""
    if len(channels) == 1:
        detail = client.request(
            "GET", f"channels/{seg(channels[0])}/", timeout=timeout, expect=shapes.CHANNEL
        )
        return [(detail["name"], int(detail.get("unread") or 0))]
    page = client.request("GET", "channels/", timeout=timeout, expect=shapes.CHANNELS)
    wanted = set(channels)
    return [
        (item["name"], int(item.get("unread") or 0))
        for item in page["channels"]
        if not wanted or item["name"] in wanted
    ]


def notice_lines(counts: Sequence[tuple[str, int]]) -> list[str]:
    return [f"{count} unread in channel {line(name)}" for name, count in counts if count > 0]


def render(event: str, lines: Sequence[str]) -> str:
    """What the hook prints for ``event`` (empty: nothing)."""
    if not lines:
        return ""
    if event == "stop":
        text = json.dumps({"systemMessage": "; ".join(lines)}, ensure_ascii=False)
        return terminal(text, as_json=True) + "\n"
    return "".join(line + "\n" for line in lines)


def run_hook(
    event: str,
    *,
    channels: Sequence[str] = (),
    url: str | None = None,
    token: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> tuple[str, str]:
    """(stdout, stderr) of the hook; never raises. The request runs in a daemon thread so
    that the whole hook, connecting included, is bounded by ``timeout``."""
    outcome: dict[str, Any] = {}

    def work() -> None:
        try:
            config = config_load(url=url, token=token)
            picked = list(channels) or (
                [config.file["channel"]] if isinstance(config.file.get("channel"), str) else []
            )
            with Client.from_config(config) as client:
                outcome["lines"] = notice_lines(unread_counts(client, picked, timeout))
        except ClientError as exc:
            outcome["error"] = f"{exc.code}: {exc.message}"
        except Exception as exc:  # a hook must never break its host
            outcome["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=work, name="agentchat-hook", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        return "", f"agentchat hook: no answer from the server within {timeout:g} s; skipped\n"
    if "error" in outcome:
        return "", "agentchat hook: " + one_line(outcome["error"])[:500] + "; skipped\n"
    return render(event, outcome.get("lines", [])), ""


def timeout_default() -> float:
    try:
        value = float(os.environ.get(ENV_TIMEOUT, DEFAULT_TIMEOUT))
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if 0 < value <= 60 else DEFAULT_TIMEOUT


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("event", choices=EVENTS, help="the host's lifecycle moment")
    parser.add_argument(
        "--channel", action="append", default=[], help="a channel to report (repeatable)"
    )
    connection_arguments(parser)
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds for the whole hook (default ${ENV_TIMEOUT} or {DEFAULT_TIMEOUT:g})",
    )


def run_parsed(options: argparse.Namespace) -> int:
    timeout = options.timeout if options.timeout and options.timeout > 0 else timeout_default()
    out, err = run_hook(
        options.event,
        channels=options.channel,
        url=getattr(options, "url", None),
        token=getattr(options, "token", None),
        timeout=timeout,
    )
    sys.stdout.write(out)
    sys.stderr.write(err)
    sys.stdout.flush()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentchat hook", description=__doc__.split("\n")[0])
    add_arguments(parser)
    try:
        options = parser.parse_args(argv)
    except SystemExit:
        return 0  # even a bad invocation must not fail the host (argparse printed why)
    return run_parsed(options)


if __name__ == "__main__":
    sys.exit(main())
