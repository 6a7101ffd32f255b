"""Private database instances for the fault tests, which stop and restart them: never the
machine's shared PostgreSQL (5432) or Redis (6379).

- ``PrivatePostgres``: ``initdb`` in a temporary directory and ``pg_ctl`` on a spare port, as
  user ``postgres`` when the tests run as root (CI), with ``fsync=off`` (a stop, even an
  immediate one, keeps what the OS was given; only a machine crash would not), commits still
  synchronous. ``stop("immediate")`` is a crash of PostgreSQL; ``start()`` brings it back on
  the same port and data.
- ``PrivateRedis``: ``redis-server`` on a spare port without persistence.

A missing tool skips, or fails under AGENTCHAT_REQUIRE_SERVICES=1 (``require_service``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import redis

from agentchat.serve import free_port
from tests.conftest import require_service
from tests.signals import wait_until


def postgres_bin() -> Path | None:
    def version(pg_ctl: str) -> int:
        name = Path(pg_ctl).parent.parent.name
        return int(name) if name.isdigit() else 0

    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=version)
    return Path(found[-1]).parent if found else None


def _as_postgres(command: list[str]) -> list[str]:
    """As user postgres when we are root (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


class PrivatePostgres:
    # Where it listens besides its socket folder, and how many connections it takes.
    listen = "127.0.0.1"
    max_connections = 40

    def __init__(self) -> None:
        bin_dir = postgres_bin()
        require_service(
            "PostgreSQL's initdb/pg_ctl",
            bin_dir is not None and (os.geteuid() != 0 or shutil.which("runuser") is not None),
            "no /usr/lib/postgresql/*/bin/pg_ctl (or no runuser to run it as postgres)",
        )
        assert bin_dir is not None
        self.bin = bin_dir
        self.root = Path(tempfile.mkdtemp(prefix="agentchat-faults-pg-"))
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")
        self.data = self.root / "data"
        self.port = free_port()
        self._run(
            "initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-sync", "--no-instructions",
        )  # fmt: skip
        self.start()

    def _around(self, command: list[str]) -> list[str]:
        """The command as it is run (a subclass runs it in a network namespace)."""
        return command

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(
            self._around(_as_postgres([str(self.bin / tool), *args])),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.root,
        )
        assert done.returncode == 0, f"{tool} failed: {done.stdout}\n{done.stderr}"

    def start(self) -> None:
        options = (
            f"-p {self.port} -c listen_addresses={self.listen} -k {self.root} -c fsync=off "
            f"-c full_page_writes=off -c max_connections={self.max_connections}"
        )
        self._run(
            "pg_ctl", "-D", str(self.data), "-o", options, "-l", str(self.root / "log"),
            "-w", "-t", "30", "start",
        )  # fmt: skip

    def stop(self, mode: str = "fast") -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop")

    def url(self, database: str = "postgres") -> str:
        return f"postgres://postgres@{self.listen.split(',')[0]}:{self.port}/{database}"

    def sql(self, statement: str, database: str = "postgres") -> None:
        import psycopg

        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(statement)

    def copy_database(self, source_url: str, name: str, tablespace: str | None = None) -> None:
        """``name`` here, a copy (schema and rows) of the database at ``source_url``, in
        ``tablespace`` when given (its tables, indexes and catalogs; the WAL stays in the
        cluster's directory)."""
        where = ["-D", tablespace] if tablespace else []
        self._run(
            "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", *where, name
        )  # fmt: skip
        dump = subprocess.run(
            [str(self.bin / "pg_dump"), "-Fc", "--no-owner", "-d", source_url],
            capture_output=True,
            timeout=60,
        )
        assert dump.returncode == 0, dump.stderr.decode(errors="replace")
        restore = subprocess.run(
            [str(self.bin / "pg_restore"), "--no-owner", "-d", self.url(name)],
            input=dump.stdout,
            capture_output=True,
            timeout=60,
        )
        assert restore.returncode == 0, restore.stderr.decode(errors="replace")

    def close(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def mount_tmpfs(size_bytes: int) -> Path | None:
    """A tmpfs of ``size_bytes`` on a new temporary directory, or None where mounting is not
    allowed (not root, no ``mount``): the caller skips with ``require_service``."""
    where = Path(tempfile.mkdtemp(prefix="agentchat-faults-full-"))
    if os.geteuid() != 0 or shutil.which("mount") is None:
        where.rmdir()
        return None
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(where)],
        capture_output=True,
        timeout=30,
    )
    if done.returncode != 0:
        where.rmdir()
        return None
    return where


def unmount(where: Path) -> None:
    subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)
    shutil.rmtree(where, ignore_errors=True)


def fill(where: Path) -> Path:
    """Take every free byte of the file system at ``where`` with one file."""
    filler = where / "filler"
    with open(filler, "wb", buffering=0) as out:
        for size in (65536, 4096, 512, 1):  # then the last scraps
            try:
                while out.write(b"\0" * size):
                    pass
            except OSError:
                pass
    return filler


class PrivateRedis:
    def __init__(self) -> None:
        binary = shutil.which("redis-server")
        require_service("redis-server", binary is not None, "redis-server is not on PATH")
        assert binary is not None
        self.binary = binary
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.proc: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        command = [self.binary, "--port", str(self.port), "--bind", "127.0.0.1"]
        self.proc = subprocess.Popen(
            [*command, "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.ping, timeout=15, what=f"redis-server on port {self.port}")

    def ping(self) -> bool:
        try:
            return bool(self.client().ping())
        except redis.RedisError:
            return False

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url, socket_connect_timeout=1, socket_timeout=2)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        self.kill()
