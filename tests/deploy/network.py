"""Several hosts on one machine, for tests/deploy/: network namespaces joined by veth pairs to
a bridge, as the machines of docs/deployment.md would be joined by a switch.

``Cluster(apps=2)`` makes, under names unique to this run (a leftover of a killed run never
collides): a ``db`` host with a private PostgreSQL (initdb in a temp dir, started inside the
namespace, on 5432 of that host: the machine's shared instance is never touched) and a
private redis-server (6379 of that host), ``apps`` app hosts each running one server process
(``python -m agentchat.serve``, port 8000), a ``proxy`` host running nginx with
deploy/nginx-agentchat.conf (port 80). The client host is this process's own namespace, on
the same subnet through a veth of its own: the test talks to every host by its address.
``close()`` stops every process and deletes every namespace and veth, whatever failed; each
step that made something registers its undoing first.
"""

from __future__ import annotations

import contextlib
import os
import random
import secrets
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from agentchat import serve
from tests.conftest import ROOT, require_service
from tests.faults.instances import PrivatePostgres
from tests.signals import wait_until

APP_PORT = 8000


def group_kill(process: subprocess.Popen[Any]) -> None:
    """SIGKILL to ``process`` and every process of its group (nginx's workers outlive a
    killed master otherwise), then reap it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr}"


def namespaces_available() -> tuple[bool, str]:
    if os.geteuid() != 0:
        return False, "network namespaces need root"
    if shutil.which("ip") is None:
        return False, "no `ip` (iproute2)"
    if shutil.which("nginx") is None:
        return False, "no nginx"
    probe = f"acprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return False, f"`ip netns add` failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return True, ""


def free_subnet() -> str:
    """A 10.x.y. prefix no route of this machine covers (a /24 for this run)."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    routes += subprocess.run(["ip", "-4", "addr"], capture_output=True, text=True).stdout
    for _ in range(100):
        prefix = f"10.{random.randint(160, 250)}.{random.randint(1, 250)}."
        if prefix not in routes:
            return prefix
    raise AssertionError("no free 10.x.y.0/24 subnet")


class NamespacedPostgres(PrivatePostgres):
    """PrivatePostgres run inside network namespace ``ns``, listening on ``address``:5432."""

    max_connections = 60

    def __init__(self, ns: str, address: str) -> None:
        self.ns, self.address = ns, address
        self.listen = f"{address},127.0.0.1"
        super().__init__()

    def _around(self, command: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *command]

    def start(self) -> None:
        self.port = 5432  # the db host's own: nothing else listens in its namespace
        hba = self.data / "pg_hba.conf"
        subnet = self.address.rsplit(".", 1)[0] + ".0/24"
        line = f"host all all {subnet} trust\n"
        if line not in hba.read_text():
            with hba.open("a") as conf:
                conf.write(line)  # the app hosts connect from the subnet
        super().start()


class HostServer(serve.ServerProcess):
    """``python -m agentchat.serve`` inside network namespace ``ns`` on ``address``:8000; back
    once it serves (the launcher's ready pipe crosses ``ip netns exec``)."""

    log_mode = "a+b"  # one log per host, across its restarts

    def __init__(self, ns: str, address: str, env: dict[str, str], log_dir: Path) -> None:
        self.ns, self.address = ns, address
        super().__init__(env=env, log_dir=log_dir, log_name=f"{ns}.log", attempts=1)

    def _address(self) -> tuple[str, int]:
        return self.address, APP_PORT

    def _around(self, command: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *command]


def nginx_site(upstreams: list[str], listen: str) -> str:
    """deploy/nginx-agentchat.conf with these upstream servers and this listen address."""
    lines: list[str] = []
    placed = False
    for line in (ROOT / "deploy" / "nginx-agentchat.conf").read_text().splitlines():
        if line.rstrip().endswith("# agentchat-upstream"):
            if not placed:  # the shipped line's parameters, on these servers
                options = line.split("#")[0].strip().rstrip(";").split()[2:]
                lines += [f"    server {' '.join([where, *options])};" for where in upstreams]
                placed = True
            continue
        if line.rstrip().endswith("# agentchat-listen"):
            line = f"    listen {listen};"
        lines.append(line)
    assert placed, "deploy/nginx-agentchat.conf lost its '# agentchat-upstream' lines"
    return "\n".join(lines) + "\n"


class Cluster:
    def __init__(self, apps: int = 2) -> None:
        available, why = namespaces_available()
        require_service("network namespaces", available, why)
        self.tag = f"ac{os.getpid() % 0xFFFF:x}{secrets.token_hex(2)}"
        self.prefix = free_subnet()
        self.root = Path(tempfile.mkdtemp(prefix=f"agentchat-deploy-{self.tag}-"))
        os.chmod(self.root, 0o755)  # the postgres user reads its folder inside
        self._undo: list[Callable[[], None]] = []
        self.apps: list[HostServer] = []
        self.tokens: dict[str, str] = {}
        try:
            self._network(apps)
            self._database()
            self.app_env = self._app_env()
            self.apps = [self.app_start(k) for k in range(apps)]
            self._proxy()
        except BaseException:
            self.close()
            raise

    # --- the network ----------------------------------------------------------------------

    def ns(self, role: str) -> str:
        return f"{self.tag}-{role}"

    def address(self, role: str) -> str:
        roles = {"client": 1, "db": 10, "proxy": 20}
        number = roles.get(role) or 30 + int(role.removeprefix("app"))
        return f"{self.prefix}{number}"

    def _network(self, apps: int) -> None:
        switch = self.ns("sw")
        ip("netns", "add", switch)
        self._undo.append(lambda: ip("netns", "del", switch))
        ip("-n", switch, "link", "add", "br0", "type", "bridge")
        ip("-n", switch, "link", "set", "br0", "up")
        roles = ["db", "proxy", *[f"app{k}" for k in range(apps)]]
        for number, role in enumerate(roles):
            ns = self.ns(role)
            ip("netns", "add", ns)
            self._undo.append(lambda ns=ns: ip("netns", "del", ns))
            outer, inner = f"v{self.tag}{number}", f"p{self.tag}{number}"
            ip("link", "add", outer, "type", "veth", "peer", "name", inner)
            ip("link", "set", outer, "netns", switch)
            ip("link", "set", inner, "netns", ns)
            ip("-n", switch, "link", "set", outer, "master", "br0", "up")
            ip("-n", ns, "link", "set", inner, "name", "eth0")
            ip("-n", ns, "addr", "add", f"{self.address(role)}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")
        # The client host: this process's namespace, one veth into the switch.
        outer, inner = f"v{self.tag}c", f"p{self.tag}c"
        ip("link", "add", outer, "type", "veth", "peer", "name", inner)
        self._undo.append(lambda: subprocess.run(["ip", "link", "del", inner], capture_output=True))
        ip("link", "set", outer, "netns", switch)
        ip("-n", switch, "link", "set", outer, "master", "br0", "up")
        ip("addr", "add", f"{self.address('client')}/24", "dev", inner)
        ip("link", "set", inner, "up")

    # --- the db host ----------------------------------------------------------------------

    def _database(self) -> None:
        from tests.conftest import database_url

        self.pg = NamespacedPostgres(self.ns("db"), self.address("db"))
        self._undo.append(self.pg.close)
        self.pg.copy_database(database_url(), "agentchat")  # the suite's migrated schema
        self.database_url = self.pg.url("agentchat")
        binary = shutil.which("redis-server")
        require_service("redis-server", binary is not None, "redis-server is not on PATH")
        assert binary is not None
        address = self.address("db")
        redis_proc = subprocess.Popen(
            ["ip", "netns", "exec", self.ns("db"), binary, "--bind", address, "--port", "6379",
             "--protected-mode", "no", "--save", "", "--appendonly", "no",
             "--logfile", str(self.root / "redis.log")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._undo.append(lambda: (redis_proc.kill(), redis_proc.wait()))
        self.redis_url = f"redis://{address}:6379/0"
        client = redis.Redis.from_url(self.redis_url, socket_connect_timeout=1)

        def up() -> bool:
            try:
                return bool(client.ping())
            except redis.RedisError:
                return False

        wait_until(up, timeout=15, what="redis-server on the db host")

    # --- the app hosts --------------------------------------------------------------------

    def _app_env(self) -> dict[str, str]:
        from django.conf import settings

        hosts = [self.address(r) for r in ("proxy", "client")]
        hosts += [self.address(f"app{k}") for k in range(10)]
        env = {
            **os.environ,
            "DATABASE_URL": self.database_url,
            "REDIS_URL": self.redis_url,
            "SECRET_KEY": settings.SECRET_KEY,
            "ALLOWED_HOSTS": ",".join([*hosts, "localhost", "127.0.0.1", "testserver"]),
            "AGENTCHAT_DATA_DIR": str(self.root / "data"),
            "AGENTCHAT_SERVER_CPU": "none",  # the same port on every host: no pinning by port
            "AGENTCHAT_STOP_GRACE_SECONDS": "5",
        }
        return env

    def app_start(self, k: int) -> HostServer:
        server = HostServer(self.ns(f"app{k}"), self.address(f"app{k}"), self.app_env, self.root)
        self._undo.append(server.kill)
        return server

    def in_host(self, role: str, command: list[str], **kwargs: object) -> subprocess.Popen[str]:
        """``command`` run on host ``role`` (inside its namespace), with the app hosts' env."""
        process: subprocess.Popen[str] = subprocess.Popen(  # type: ignore[call-overload]
            ["ip", "netns", "exec", self.ns(role), *command],
            cwd=ROOT,
            env=self.app_env,
            text=True,
            **kwargs,
        )

        def end() -> None:
            if process.poll() is None:
                process.kill()
                process.wait()

        self._undo.append(end)
        return process

    # --- the proxy host -------------------------------------------------------------------

    def _proxy(self) -> None:
        folder = self.root / "nginx"
        folder.mkdir()
        upstreams = [f"{s.address}:{APP_PORT}" for s in self.apps]
        listen = f"{self.address('proxy')}:80"
        (folder / "nginx.conf").write_text(
            f"daemon off;\nworker_processes 1;\npid {folder}/nginx.pid;\n"
            f"error_log {folder}/error.log;\nuser root;\nevents {{ worker_connections 1024; }}\n"
            f"http {{\naccess_log off;\nclient_body_temp_path {folder}/body;\n"
            f"proxy_temp_path {folder}/proxy;\nfastcgi_temp_path {folder}/fastcgi;\n"
            f"uwsgi_temp_path {folder}/uwsgi;\nscgi_temp_path {folder}/scgi;\n"
            f"{nginx_site(upstreams, listen)}}}\n"
        )
        nginx = subprocess.Popen(
            ["ip", "netns", "exec", self.ns("proxy"), "nginx", "-p", str(folder), "-c",
             str(folder / "nginx.conf")],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its workers in its process group: killed with it
        )  # fmt: skip
        self._undo.append(lambda: group_kill(nginx))
        self.proxy_url = f"http://{listen}"
        self.proxy_ws_url = f"ws://{listen}"
        import httpx

        def serving() -> bool:
            assert nginx.poll() is None, (folder / "error.log").read_text()
            try:
                return httpx.get(self.proxy_url + "/api/v1/me/", timeout=1).status_code == 401
            except httpx.HTTPError:
                return False

        wait_until(serving, timeout=15, what="nginx on the proxy host")

    def close(self) -> None:
        errors = []
        while self._undo:
            try:
                self._undo.pop()()
            except Exception as exc:  # undo the rest regardless
                errors.append(repr(exc))
        shutil.rmtree(self.root, ignore_errors=True)
        assert not errors, errors


AGENTS_SCRIPT = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
import django
django.setup()
from agentchat.core.identity.services import agent_get_or_create, token_create
print(json.dumps({n: token_create(agent=agent_get_or_create(name=n)) for n in sys.argv[1:]}))
"""


def agents_make(cluster: Cluster, names: list[str]) -> dict[str, str]:
    """A token for each agent, made in the cluster's database (as an operator would, with a
    command on one of its machines)."""
    import json
    import sys

    done = subprocess.run(
        [sys.executable, "-c", AGENTS_SCRIPT, *names],
        cwd=ROOT,
        env=cluster.app_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    tokens: dict[str, str] = json.loads(done.stdout.strip().splitlines()[-1])
    return tokens
