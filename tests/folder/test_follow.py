"""``sync_folder --follow`` beside a server that is another process: on the default set-up
(SQLite, in-memory layer, so only ``PRAGMA data_version`` can tell), and on Redis (the layer's
rings, with the SQLite check turned off by a poll of an hour)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
from django.db import connection

from tests.conftest import (
    ROOT,
    ServerProcess,
    auth,
    redis_reachable,
    redis_url_for_tests,
    require_service,
)
from tests.folder.test_command import env
from tests.signals import sigint_as_a_terminal_has_it, wait_until


def follower(root: Path, *flags: str, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "manage.py"),
            "sync_folder",
            "--root",
            str(root),
            "--follow",
            *flags,
        ],
        cwd=ROOT,
        env={**env(), **(extra_env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def create_channel(url: str, token: str) -> None:
    r = httpx.post(f"{url}/api/v1/channels/", json={"name": "live"}, headers=auth(token))
    assert r.status_code == 201, r.text


def stopped(proc: subprocess.Popen, sig: int) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=30)
    return proc.returncode, out, err


def scenario_over_http(url: str, token: str, root: Path) -> None:
    """Every kind of change shows up in the folder without a sync being asked for."""
    with httpx.Client(base_url=url, headers=auth(token), timeout=30) as http:
        r = http.post("/api/v1/channels/live/messages/", json={"title": "hello", "body": "hi"})
        assert r.status_code == 201, r.text
        wait_until(lambda: list((root / "live").glob("0001-alice-hello.md")), what="message")
        r = http.post("/api/v1/channels/live/tasks/", json={"id": "T-1", "title": "t"})
        assert r.status_code == 201, r.text
        wait_until(lambda: (root / "live" / "tasks" / "T-1.json").exists(), what="task")
        r = http.post("/api/v1/channels/live/tasks/T-1/claim/", json={})
        assert r.status_code == 200, r.text
        claim = root / "live" / "claims" / "T-1.alice.json"
        wait_until(claim.exists, what="claim")
        r = http.post("/api/v1/channels/live/locks/", json={"paths": ["src/a.py"]})
        assert r.status_code == 201, r.text
        lock = root / "live" / "locks" / f"{r.json()['lock_id']}.json"
        wait_until(lock.exists, what="lock")
        assert http.delete(f"/api/v1/channels/live/locks/{lock.stem}/").status_code == 200
        wait_until(lambda: not lock.exists(), what="unlocked lock removed")
        r = http.post("/api/v1/channels/live/tasks/T-1/done/", json={})
        assert r.status_code == 200, r.text
        wait_until(lambda: not claim.exists(), what="claim removed")
        wait_until(
            lambda: (
                json.loads((root / "live" / "tasks" / "T-1.json").read_text())["status"] == "done"
            ),
            what="task done",
        )


def test_follow_keeps_up_with_a_server_in_another_process(
    live: ServerProcess, make_agent, tmp_path: Path
) -> None:
    """On SQLite (the default set-up: the server's in-memory layer reaches no other process)
    data_version wakes the follower; on PostgreSQL only the Redis layer can. Either way a
    channel made after the follower started is synced at once."""
    _, token = make_agent("alice")
    root = tmp_path / "root"
    if connection.vendor != "sqlite":
        url = os.environ.get("REDIS_URL", "")
        require_service("Redis", bool(url) and redis_reachable(url), "PostgreSQL follows by Redis")
    # An interval of an hour: whatever shows up came from a wake-up, not the safety net.
    proc = follower(root, "--poll", "0.1", "--interval", "3600")
    try:
        wait_until(lambda: (root / ".agentchat-sync").is_dir(), what="first sync")
        create_channel(live.url, token)
        wait_until(lambda: (root / "live" / "_meta.json").exists(), what="new channel synced")
        scenario_over_http(live.url, token, root)
    finally:
        code, out, err = stopped(proc, signal.SIGTERM)
    assert code == 0, err
    assert "Traceback" not in err
    assert "live:" in out  # a summary line per sync that changed something


def test_follow_stops_cleanly_on_sigint(transactional_db, tmp_path: Path) -> None:
    with sigint_as_a_terminal_has_it():
        proc = follower(tmp_path / "root", "--poll", "0.1")
    wait_until(lambda: (tmp_path / "root" / ".agentchat-sync").is_dir(), what="first sync")
    code, _, err = stopped(proc, signal.SIGINT)
    assert code == 0, err
    assert "Traceback" not in err


def test_follow_is_rung_by_the_redis_layer(transactional_db, make_agent, tmp_path: Path) -> None:
    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    _, token = make_agent("alice")
    server = ServerProcess(env={"REDIS_URL": url})
    root = tmp_path / "root"
    # Neither data_version (checked once an hour) nor the interval can wake it: only rings,
    # the roster's (a channel made, a marker claimed) and the channel's (messages).
    proc = follower(root, "--poll", "3600", "--interval", "3600", extra_env={"REDIS_URL": url})
    try:
        wait_until(lambda: (root / ".agentchat-sync").is_dir(), what="first sync")
        with httpx.Client(base_url=server.url, headers=auth(token), timeout=30) as http:
            assert http.post("/api/v1/channels/", json={"name": "rung"}).status_code == 201
            wait_until(lambda: (root / "rung" / "_meta.json").exists(), what="new channel")
            assert http.post("/api/v1/channels/rung/claims/task-7.md/").status_code == 201
            wait_until(lambda: (root / "rung" / "task-7.CLAIMED-alice.md").exists(), what="marker")
            for i in range(3):
                r = http.post("/api/v1/channels/rung/messages/", json={"title": f"m{i}"})
                assert r.status_code == 201
                seq = r.json()["seq"]
                wait_until(
                    lambda seq=seq, i=i: (root / "rung" / f"{seq:04d}-alice-m{i}.md").exists(),
                    what=f"message {seq}",
                )
    finally:
        code, _, err = stopped(proc, signal.SIGTERM)
        server.stop()
    assert code == 0, err


def test_follow_on_redis_is_rung_by_an_import(transactional_db, tmp_path: Path) -> None:
    """A reference folder imported (by another process) while the follower runs on Redis is
    synced at once: the import's channels ring the roster group when it commits."""
    from tests.folder.test_import import extract

    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    root = tmp_path / "root"
    source = extract(tmp_path / "source")
    proc = follower(root, "--poll", "3600", "--interval", "3600", extra_env={"REDIS_URL": url})
    try:
        wait_until(lambda: (root / ".agentchat-sync").is_dir(), what="first sync")
        run = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "import_folder", "--root", str(source)],
            cwd=ROOT,
            env={**env(), "REDIS_URL": url},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert run.returncode == 0, run.stderr
        wait_until(lambda: (root / "backend" / "_meta.json").exists(), what="imported channel")
        wait_until(lambda: (root / "design" / "_meta.json").exists(), what="imported channel")
    finally:
        code, _, err = stopped(proc, signal.SIGTERM)
    assert code == 0, err
