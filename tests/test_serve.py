"""``python -m agentchat.serve``: CPU pinning."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
