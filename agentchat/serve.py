"""Start the server: ``python -m agentchat.serve [--host H] [--port P] [--no-access-log]``.

One place for daphne's flags, used by ``make run``, the tests and the benchmarks alike.

Daphne runs in this process and the process leaves with ``os._exit`` once daphne has stopped.
A plain interpreter exit joins every worker thread, and a request thread that was waiting on
the (now stopped) event loop never finishes: SIGTERM with posts in flight hung the server
forever. Such a thread had not committed anything the client was told about, so leaving it
behind loses nothing.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import threading
from typing import Any

LISTEN_BACKLOG = 1024
DAPHNE_FLAGS = [
    # Bounded websocket messages (daphne < 4.2.2 left them unbounded) and frames.
    "--websocket-max-message-size",
    str(1024 * 1024),
    "--websocket-max-frame-size",
    str(1024 * 1024),
    "--ping-interval",
    "20",
    "--ping-timeout",
    "30",
    # On SIGTERM, in-flight applications get this long before they are cancelled.
    "--application-close-timeout",
    "3",
]


def daphne_command(host: str, port: int, *, access_log: bool = True) -> list[str]:
    """The command line that starts a server process."""
    command = [sys.executable, "-m", "agentchat.serve", "--host", host, "--port", str(port)]
    return command if access_log else [*command, "--no-access-log"]


def _skip_form_parsing() -> None:
    """Daphne hands the application the raw body and never reads Twisted's parsed form
    arguments, yet Twisted parses the Content-Type of every POST (about 0.2 ms of CPU per
    request on this machine kind, through the email package) and would decode a multipart or
    URL-encoded body into a second copy in memory. Twisted's request takes a flag for this."""
    from daphne import http_protocol

    class WebRequest(http_protocol.WebRequest):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("parsePOSTFormSubmission", False)
            super().__init__(*args, **kwargs)

    http_protocol.WebRequest = WebRequest  # what daphne's HTTPFactory builds requests with


def pin_to_one_cpu(choice: str, port: int) -> int | None:
    """Keep every thread of this process on one CPU; returns it (None: left to the kernel).

    The server is bound by the GIL to about one core's work. Spread over two cores, each
    hand-off of the GIL between the event loop and a database thread (several per request:
    SQLite releases the GIL around every statement) is a cross-core wake-up, and the write
    transaction waits for it. Measured here in five alternating runs with 8 clients posting:
    median 478 posts/s and 2.1 ms of CPU per post pinned, 355 and 2.9 ms unpinned. ``choice`` is
    ``auto`` (one of the allowed CPUs, picked by port so that processes on consecutive ports
    spread out), ``none``, or a CPU number. Threads started later inherit the affinity.
    """
    if choice == "none" or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = sorted(os.sched_getaffinity(0))
    if choice == "auto":
        if len(allowed) < 2:
            return None
        cpu = allowed[port % len(allowed)]
    else:
        cpu = int(choice)
        if cpu not in allowed:
            raise SystemExit(f"--cpu {cpu}: this process may run on CPUs {allowed}")
    os.sched_setaffinity(0, {cpu})
    return cpu


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Run the AgentChat server (daphne).")
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "8000")))
    parser.add_argument("--no-access-log", action="store_true")
    parser.add_argument(
        "--cpu",
        default=os.environ.get("AGENTCHAT_SERVER_CPU", "auto"),
        help="run every thread on one CPU: auto (picked by port), none, or a CPU number",
    )
    args = parser.parse_args(argv)
    if args.cpu != "auto" and args.cpu != "none" and not args.cpu.isdigit():
        parser.error("--cpu takes auto, none or a CPU number")
    pin_to_one_cpu(args.cpu, args.port)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    from agentchat.datadir import data_dir_prepare

    data_dir_prepare()

    from daphne.cli import CommandLineInterface

    _skip_form_parsing()

    # An explicit endpoint for a deeper listen queue than Twisted's 50: a burst of a thousand
    # agents connecting to wait would otherwise see dropped connections and retries.
    interface = args.host.replace(":", "\\:")
    endpoint = f"tcp:port={args.port}:interface={interface}:backlog={LISTEN_BACKLOG}"
    daphne_args = ["-e", endpoint, *DAPHNE_FLAGS]
    if args.no_access_log:
        daphne_args += ["--access-log", os.devnull]
    code = 0
    try:
        CommandLineInterface().run([*daphne_args, "agentchat.asgi:application"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    logging.getLogger("agentchat.serve").info(
        "stopped; exiting without joining %d worker thread(s)", len(left)
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
