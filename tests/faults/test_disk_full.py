"""Disk full on SQLite (docs/deployment.md, "Faults"): a write answers 507 ``STORAGE_FULL`` and
is rolled back whole, reads keep working, and once space is freed writes succeed again.

The database lives on a small tmpfs mounted for the test (CI runs as root); where mounting is
not allowed the test skips saying so (fails under AGENTCHAT_REQUIRE_SERVICES=1). It runs in
the SQLite suite only: the full disk is SQLite's file (the private instance of PostgreSQL
would cost its own start; the PostgreSQL suite runs tests/faults/test_postgres_disk_full.py).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest
from django.db import connection

from tests.conftest import ServerProcess, auth, require_service
from tests.faults.instances import fill, mount_tmpfs, unmount

BIG = "x" * 200_000  # a body that makes the WAL grow


def test_disk_full_answers_507_keeps_reads_and_writes_nothing_half(transactional_db, make_agent):
    if connection.vendor != "sqlite":
        pytest.skip("the SQLite suite runs it (see the module's docstring)")
    _, alice = make_agent("alice")
    source = Path(connection.settings_dict["NAME"])
    where = mount_tmpfs(source.stat().st_size + 6 * 1024 * 1024)
    require_service("a tmpfs mount (root)", where is not None, "mount -t tmpfs is not allowed here")
    assert where is not None
    server = None
    try:
        db_path = where / "agentchat.sqlite3"
        with sqlite3.connect(source) as src, sqlite3.connect(db_path) as dst:
            src.backup(dst)
        server = ServerProcess(env={"DATABASE_URL": f"sqlite:///{db_path}"})
        http = httpx.Client(base_url=server.url, headers=auth(alice), timeout=15)
        assert http.post("/api/v1/channels/", json={"name": "full"}).status_code == 201
        messages = "/api/v1/channels/full/messages/"
        acked: list[str] = []
        for i in range(3):
            r = http.post(messages, json={"id": f"before-{i}", "title": "t", "body": BIG})
            assert r.status_code == 201, r.text
            acked.append(f"before-{i}")
        filler = fill(where)
        refused = None
        for i in range(60):  # the WAL reuses its space for a while, then must grow
            r = http.post(messages, json={"id": f"full-{i}", "title": "t", "body": BIG})
            if r.status_code == 507:
                assert r.json()["error"]["code"] == "STORAGE_FULL", r.text
                refused = f"full-{i}"
                break
            assert r.status_code == 201, r.text
            acked.append(f"full-{i}")
        assert refused is not None, "60 posts of 200 kB fitted on a full disk"
        # Reads keep working on a full disk.
        r = http.get(messages, params={"after": 0, "limit": 1000})
        assert r.status_code == 200, r.text
        assert [m["id"] for m in r.json()["messages"]] == acked
        assert http.get("/api/v1/channels/full/").status_code == 200
        assert http.get("/api/v1/me/").status_code == 200
        # Space again: the refused post is retried and stored once.
        filler.unlink()
        r = http.post(messages, json={"id": refused, "title": "t", "body": BIG})
        assert r.status_code == 201, r.text
        acked.append(refused)
        http.close()
        assert "INTERNAL_ERROR" not in server.output()
        server.stop()
        server = None
        with sqlite3.connect(db_path) as db:
            assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
            rows = db.execute(
                "SELECT m.id, m.seq FROM channels_app_message m JOIN channels_app_channel c "
                "ON c.id = m.channel_id WHERE c.name = 'full' ORDER BY m.seq"
            ).fetchall()
        assert [mid for mid, _ in rows] == acked  # each once, nothing half-written
        assert [seq for _, seq in rows] == list(range(1, len(acked) + 1))
    finally:
        if server is not None:
            server.stop()
        unmount(where)
