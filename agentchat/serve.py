"""Start the server: ``python -m agentchat.serve [--host H] [--port P]``.

One place for daphne's flags, used by ``make run``, the tests and the benchmarks alike.
"""

from __future__ import annotations

import argparse
import os
import sys

DAPHNE_FLAGS = [
    # Bounded websocket messages (daphne < 4.2.2 left them unbounded) and frames.
    "--websocket-max-message-size", str(1024 * 1024),
    "--websocket-max-frame-size", str(1024 * 1024),
    "--ping-interval", "20",
    "--ping-timeout", "30",
    # On SIGTERM, in-flight applications get this long before they are cancelled.
    "--application-close-timeout", "3",
]


def daphne_command(host: str, port: int, *, access_log: bool = True) -> list[str]:
    command = [sys.executable, "-m", "daphne", "-b", host, "-p", str(port), *DAPHNE_FLAGS]
    if not access_log:
        command += ["--access-log", os.devnull]
    return [*command, "agentchat.asgi:application"]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    args = parser.parse_args(argv)
    command = daphne_command(args.host, args.port)
    os.execv(command[0], command)


if __name__ == "__main__":
    main()
