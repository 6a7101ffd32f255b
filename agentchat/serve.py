"""Start the server: ``python -m agentchat.serve [--host H] [--port P] [--no-access-log]
[--cpu C] [--ready-fd N]``.

One place for daphne's flags, and for starting a server in a child process
(``ServerProcess``), used by ``make run``, the tests and the benchmarks alike: the tests may
not import ``bench/`` and the benchmarks should not import the tests, and both need the very
command line that production runs, so the launcher lives next to it. It imports nothing of
Django at module level.

Daphne runs in this process and the process leaves with ``os._exit`` once daphne has stopped.
A plain interpreter exit joins every worker thread, and a request thread that was waiting on
the (now stopped) event loop never finishes: SIGTERM with posts in flight hung the server
forever. Such a thread had not committed anything the client was told about, so leaving it
behind loses nothing.
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentchat.core.http.webrequest import web_request_install

ROOT = Path(__file__).resolve().parent.parent

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


def daphne_command(
    host: str, port: int, *, access_log: bool = True, ready_fd: int | None = None
) -> list[str]:
    """The command line that starts a server process."""
    command = [sys.executable, "-m", "agentchat.serve", "--host", host, "--port", str(port)]
    if not access_log:
        command.append("--no-access-log")
    if ready_fd is not None:
        command += ["--ready-fd", str(ready_fd)]
    return command


def _notify_ready(fd: int, addresses: list[tuple[str, int]]) -> None:
    try:
        listening = ",".join(f"{host}:{port}" for host, port in addresses)
        os.write(fd, f"ready {listening}\n".encode())
        os.close(fd)
    except OSError:
        logging.getLogger("agentchat.serve").exception("could not write to --ready-fd %d", fd)


def _daphne_cli(ready_fd: int | None, access_log: bool = True) -> Any:
    """Daphne's command line; with ``ready_fd``, its server writes ``ready <host:port>`` to that
    descriptor once its reactor runs with the sockets listening, and closes it. Without
    ``access_log`` no access line is made at all (daphne would format each one for
    ``/dev/null``)."""
    from daphne.cli import CommandLineInterface
    from daphne.server import Server
    from twisted.internet import reactor  # daphne.server installed the asyncio reactor

    class ReadyServer(Server):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            if ready_fd is not None:
                kwargs["ready_callable"] = self._ready_soon
            if not access_log:
                kwargs["action_logger"] = None
            super().__init__(*args, **kwargs)
            self.ports: list[Any] = []
            gc_settle()
            reactor.callWhenRunning(reactor.callLater, 0, _drain_on_sigterm, self)

        def listen_success(self, port: Any) -> None:
            self.ports.append(port)
            super().listen_success(port)

        def _ready_soon(self) -> None:
            # Daphne calls this with the sockets bound and just before it runs the reactor.
            reactor.callWhenRunning(_notify_ready, ready_fd, list(self.listening_addresses))

    class Cli(CommandLineInterface):
        server_class = ReadyServer

    return Cli()


STOP_GRACE = float(os.environ.get("AGENTCHAT_STOP_GRACE_SECONDS", "10"))
STOP_POLL = 0.05
WS_STOPPING = 4503  # the close code of a websocket when its server stops: reconnect with since


def _drain_on_sigterm(server: Any) -> None:
    """SIGTERM drains the process instead of cutting every connection (daphne's own handler,
    replaced here once the reactor runs): stop listening (a proxy's next connect goes to
    another process), answer the parked waits 503 with Retry-After (``core.live.stopping``),
    close websockets with 4503 and end SSE streams (the clients reconnect with their cursor),
    let the requests in flight finish for at most AGENTCHAT_STOP_GRACE_SECONDS, then stop as
    daphne does (what is still running then is cancelled)."""
    from daphne.ws_protocol import WebSocketProtocol
    from twisted.internet import reactor as twisted_reactor

    from agentchat.core.live.stopping import stopping_begin

    reactor: Any = twisted_reactor  # typed as IReactorTime alone

    log = logging.getLogger("agentchat.serve")
    state = {"deadline": 0.0}

    def running() -> list[Any]:
        return [
            protocol
            for protocol, details in list(server.connections.items())
            if (app := details.get("application_instance")) is not None and not app.done()
        ]

    def streams_end() -> None:
        for protocol in running():
            if isinstance(protocol, WebSocketProtocol):
                if protocol.state == protocol.STATE_OPEN:
                    protocol.sendClose(code=WS_STOPPING, reason="server stopping")
            elif getattr(protocol, "startedWriting", False):
                kind = protocol.responseHeaders.getRawHeaders(b"content-type") or [b""]
                if kind[0].startswith(b"text/event-stream"):
                    protocol.loseConnection()

    def settle() -> None:
        left = running()
        if not left or time.monotonic() >= state["deadline"]:
            log.info("stopping with %d request(s) still running", len(left))
            reactor.stop()
            return
        streams_end()  # a stream may have begun meanwhile
        reactor.callLater(STOP_POLL, settle)

    def drain() -> None:
        if state["deadline"]:
            reactor.stop()  # a second SIGTERM: stop now
            return
        state["deadline"] = time.monotonic() + STOP_GRACE
        log.info("SIGTERM: draining (%d connection(s))", len(server.connections))
        for port in server.ports:
            port.stopListening()
        stopping_begin()
        streams_end()
        reactor.callLater(STOP_POLL, settle)

    signal.signal(signal.SIGTERM, lambda signum, frame: reactor.callFromThread(drain))


# The collector's first threshold (allocations less deallocations between young collections):
# a request allocates a few thousand objects, so Python's 700 ran one every request or so.
GC_YOUNG_THRESHOLD = 10_000


def gc_settle() -> None:
    """Once the application is loaded (daphne imported it before it builds its server): move
    every object alive now (Django, the apps, the URL and model tables: hundreds of thousands
    that live as long as the process) out of the collector's view (``gc.freeze``), and collect
    the young generation less often. Measured: the collector was 11 % of a post's instructions
    (callgrind), most of it full collections walking those long-lived objects again; cycles
    made by requests are still collected."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(GC_YOUNG_THRESHOLD, middle, old)


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
    parser.add_argument(
        "--ready-fd",
        type=int,
        metavar="N",
        help="once serving, write 'ready <host:port>' and a newline to file descriptor N and "
        "close it (for supervisors and launchers)",
    )
    args = parser.parse_args(argv)
    if args.cpu != "auto" and args.cpu != "none" and not args.cpu.isdigit():
        parser.error("--cpu takes auto, none or a CPU number")
    pin_to_one_cpu(args.cpu, args.port)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    from agentchat.datadir import data_dir_prepare

    data_dir_prepare()

    cli = _daphne_cli(args.ready_fd, access_log=not args.no_access_log)
    web_request_install()

    # An explicit endpoint for a deeper listen queue than Twisted's 50: a burst of a thousand
    # agents connecting to wait would otherwise see dropped connections and retries.
    interface = args.host.replace(":", "\\:")
    endpoint = f"tcp:port={args.port}:interface={interface}:backlog={LISTEN_BACKLOG}"
    daphne_args = ["-e", endpoint, *DAPHNE_FLAGS]
    if args.no_access_log:
        daphne_args += ["--access-log", os.devnull]
    code = 0
    try:
        cli.run([*daphne_args, "agentchat.asgi:application"])
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    left = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    logging.getLogger("agentchat.serve").info(
        "stopped; exiting without joining %d worker thread(s)", len(left)
    )
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ServerProcess:
    """``python -m agentchat.serve`` in a child process on a free 127.0.0.1 port.

    The constructor returns once the server serves: the child writes ``ready`` to a pipe
    (``--ready-fd``) when its reactor runs with the socket listening, so nothing polls or
    sleeps; a child that dies first closes the pipe, and the constructor raises with its
    output. The port is picked before the child binds it, so another process may take it in
    between: then the start is retried on another port. Output goes to
    ``log_dir/server-<port>.log`` (``log_name`` is formatted with the port).
    """

    def __init__(
        self,
        *,
        env: Mapping[str, str],
        log_dir: Path,
        log_name: str = "server-{port}.log",
        start_timeout: float = 30.0,
        access_log: bool = False,
        attempts: int = 3,
    ) -> None:
        for attempt in range(1, attempts + 1):
            self._spawn(dict(env), log_dir, log_name, access_log)
            error = self._wait_ready(start_timeout)
            if error is None:
                return
            output = self.output()
            self.kill()
            if "Address already in use" not in output or attempt == attempts:
                raise RuntimeError(f"server on port {self.port} {error}: {output[-3000:]}")

    # A subclass's log may be kept across its restarts ("a+b").
    log_mode = "w+b"

    def _address(self) -> tuple[str, int]:
        """Where the next start listens (a subclass: another host's address)."""
        return "127.0.0.1", free_port()

    def _around(self, command: list[str]) -> list[str]:
        """The command as it is run (a subclass: in a network namespace)."""
        return command

    def _spawn(self, env: dict[str, str], log_dir: Path, log_name: str, access_log: bool) -> None:
        host, self.port = self._address()
        self.url = f"http://{host}:{self.port}"
        self.ws_url = f"ws://{host}:{self.port}"
        self.log_path = log_dir / log_name.format(port=self.port)
        self.log = open(self.log_path, self.log_mode)  # noqa: SIM115  (closed by stop(), kill())
        read_end, write_end = os.pipe()
        self.command = self._around(
            daphne_command(host, self.port, access_log=access_log, ready_fd=write_end)
        )
        try:
            self.proc = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=env,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                pass_fds=(write_end,),
            )
        finally:
            os.close(write_end)  # the child's copy is the only one: its exit means EOF
        self._ready_pipe = read_end

    def _wait_ready(self, timeout: float) -> str | None:
        """None once the child said ready; else what went wrong."""
        deadline = time.monotonic() + timeout
        said = b""
        try:
            while b"\n" not in said:
                left = deadline - time.monotonic()
                if left <= 0:
                    return f"did not start in {timeout:g} s"
                readable, _, _ = select.select([self._ready_pipe], [], [], left)
                if readable:
                    chunk = os.read(self._ready_pipe, 256)
                    if not chunk:
                        return "exited before it was ready"
                    said += chunk
        finally:
            os.close(self._ready_pipe)
        return None if said.startswith(b"ready ") else f"said {said!r} instead of ready"

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        return self.log_path.read_bytes().decode(errors="replace")

    def threads(self) -> int:
        return len(os.listdir(f"/proc/{self.proc.pid}/task"))

    def stop(self, timeout: float = 10.0) -> float | None:
        """SIGTERM; the seconds the server took to exit, or None when it was still running
        after ``timeout`` and had to be killed."""
        took: float | None = 0.0
        if self.proc.poll() is None:
            started = time.monotonic()
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
                took = time.monotonic() - started
            except subprocess.TimeoutExpired:
                took = None
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return took

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs in the server."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


if __name__ == "__main__":
    main()
