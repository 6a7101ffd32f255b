"""Running ``agentchat`` as a user does: a child process, its config from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


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

    def __call__(
        self, *args: str, input: str | None = "", timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "agentchat.client.cli", *args],
            cwd=ROOT,
            env=self.env(),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
