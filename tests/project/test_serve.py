"""``python -m agentchat.serve``: CPU pinning, and the launcher the tests and benchmarks use."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from agentchat import serve
from tests.commands import own_sqlite_file
from tests.conftest import ROOT


def affinity_after(choice: str, port: int) -> tuple[str, set[int]]:
    """Run pin_to_one_cpu in a child process (it changes the caller's affinity)."""
    code = (
        "import json, os\n"
        "from agentchat.serve import pin_to_one_cpu\n"
        f"print(pin_to_one_cpu({choice!r}, {port}))\n"
        "print(json.dumps(sorted(os.sched_getaffinity(0))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    returned, allowed = out.stdout.splitlines()
    return returned, set(json.loads(allowed))


ALLOWED = sorted(os.sched_getaffinity(0))


def test_auto_pins_every_thread_to_one_cpu_picked_by_port():
    for port in (8000, 8001):
        returned, allowed = affinity_after("auto", port)
        if len(ALLOWED) < 2:
            assert (returned, allowed) == ("None", set(ALLOWED))
        else:
            cpu = ALLOWED[port % len(ALLOWED)]
            assert (returned, allowed) == (str(cpu), {cpu})


def test_none_leaves_the_affinity_alone():
    assert affinity_after("none", 8000) == ("None", set(ALLOWED))


def test_a_cpu_this_process_may_not_use_is_refused():
    out = subprocess.run(
        [sys.executable, "-m", "agentchat.serve", "--port", "1", "--cpu", "4096"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode != 0
    assert "--cpu 4096: this process may run on CPUs" in out.stderr


@pytest.mark.parametrize("value", ["x", "-1", "1.5"])
def test_a_bad_cpu_value_is_a_usage_error(value):
    out = subprocess.run(
        [sys.executable, "-m", "agentchat.serve", "--port", "1", "--cpu", value],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 2
    assert "--cpu takes auto, none or a CPU number" in out.stderr


def cpu_list(text: str) -> set[int]:
    """``0-2,5`` as in /proc/<pid>/status."""
    cpus: set[int] = set()
    for part in text.split(","):
        low, _, high = part.partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


def test_every_thread_of_the_live_server_runs_on_one_cpu(live):
    seen = set()
    for task in Path(f"/proc/{live.proc.pid}/task").iterdir():
        status = (task / "status").read_text()
        line = next(x for x in status.splitlines() if x.startswith("Cpus_allowed_list:"))
        seen.add(frozenset(cpu_list(line.split(":", 1)[1].strip())))
    if len(ALLOWED) >= 2:
        assert len(seen) == 1 and len(next(iter(seen))) == 1, seen
    else:
        assert seen == {frozenset(ALLOWED)}


def launcher_env(tmp_path: Path) -> dict[str, str]:
    return {
        **os.environ,
        "AGENTCHAT_DATA_DIR": str(tmp_path / "data"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": "s" * 50,
    }


@own_sqlite_file
def test_the_launcher_returns_once_the_server_serves_and_retries_a_port_taken_meanwhile(
    tmp_path, monkeypatch
):
    # The port is picked before the child binds it: here another process holds the first pick.
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    taken_port = taken.getsockname()[1]
    picks = iter([taken_port, serve.free_port()])
    monkeypatch.setattr(serve, "free_port", lambda: next(picks))
    try:
        server = serve.ServerProcess(env=launcher_env(tmp_path), log_dir=tmp_path)
    finally:
        taken.close()
    try:
        # Ready means serving: the very first request is answered, nothing waited for.
        assert httpx.get(f"{server.url}/signin/", timeout=10).status_code == 200
        assert server.port != taken_port
        assert "Address already in use" in (tmp_path / f"server-{taken_port}.log").read_text()
        assert (tmp_path / f"server-{server.port}.log").exists()
    finally:
        assert server.stop() is not None


@own_sqlite_file
def test_the_launcher_reports_a_server_that_dies_before_it_is_ready(tmp_path):
    env = launcher_env(tmp_path)
    (tmp_path / "data").write_text("a file where the data folder should be")
    with pytest.raises(RuntimeError, match="exited before it was ready") as exc:
        serve.ServerProcess(env=env, log_dir=tmp_path, start_timeout=60)
    assert "Not a directory" in str(exc.value)  # the child's own output
