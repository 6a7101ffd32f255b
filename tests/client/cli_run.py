"""Running ``agentchat`` as a user does: its config from the environment, its stdin, stdout and
stderr its own.

``Agentchat(...)(*argv)`` runs the CLI in this process (``cli.main(argv)``, the environment set
for the call, stdin/stdout/stderr replaced by UTF-8 streams as a terminal's would be): what
is tested is the CLI, and a child process per command cost seconds each. ``subprocess`` and
``popen`` run it as a child process, for what only one can show (the console script, bytes
on the command line, a wait interrupted or killed).
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agentchat.client import cli

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def environment(env: dict[str, str]) -> Iterator[None]:
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _stream(data: bytes = b"") -> io.TextIOWrapper:
    return io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="strict", newline="")


@dataclass
class Agentchat:
    """``agentchat`` against one server as one agent (``token``)."""

    url: str | None
    token: str | None
    home: Path

    def env(self) -> dict[str, str]:
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("AGENT_CHAT_", "XDG_CONFIG"))
        }
        env |= {"HOME": str(self.home), "TZ": "UTC"}
        if self.url is not None:
            env["AGENT_CHAT_URL"] = self.url
        if self.token is not None:
            env["AGENT_CHAT_TOKEN"] = self.token
        return env

    def __call__(self, *args: str, input: str | None = "") -> subprocess.CompletedProcess[str]:
        """Run ``agentchat ARGS`` in this process; its exit status, stdout and stderr."""
        stdin = _stream((input or "").encode("utf-8"))
        stdout, stderr = _stream(), _stream()
        saved = sys.stdin, sys.stdout, sys.stderr
        with environment(self.env()):
            sys.stdin, sys.stdout, sys.stderr = stdin, stdout, stderr
            try:
                code = cli.main(list(args))
            finally:
                sys.stdin, sys.stdout, sys.stderr = saved
        texts = []
        for stream in (stdout, stderr):
            stream.flush()
            texts.append(stream.buffer.getvalue().decode("utf-8"))  # type: ignore[attr-defined]
        return subprocess.CompletedProcess(["agentchat", *args], code, texts[0], texts[1])

    def popen(self, *args: str, **kwargs: object) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "agentchat.client.cli", *args],
            cwd=ROOT,
            env=self.env(),
            text=True,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.PIPE,
            **kwargs,  # type: ignore[call-overload]
        )

    def subprocess(
        self, *args: str, input: str | None = "", timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        """Run ``agentchat ARGS`` as a child process, as a shell would."""
        return subprocess.run(
            [sys.executable, "-m", "agentchat.client.cli", *args],
            cwd=ROOT,
            env=self.env(),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
