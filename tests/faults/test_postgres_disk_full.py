"""Disk full on PostgreSQL (docs/deployment.md, "Faults"): while clients post, the database's
disk fills up; a write that needs space answers 507 ``STORAGE_FULL`` (PostgreSQL's "could not
extend file …: No space left on device", SQLSTATE 53100) and is rolled back whole, reads keep
working, and once space is freed the same clients' writes succeed again by themselves, each
stored once.

On a private PostgreSQL (``tests/faults/instances.py``) whose test database lives in a
tablespace on a small tmpfs mounted for the test (CI runs as root): the cluster and its WAL
stay on the ordinary disk, as with a separate WAL volume (a full WAL disk makes PostgreSQL
itself stop: that is a restart, tests/faults/test_postgres_restart.py). PostgreSQL suite only,
as test_postgres_restart.py is (the copy of the migrated test database comes from it); the
SQLite suite runs tests/faults/test_disk_full.py.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections import Counter

import httpx
import psycopg
import pytest
from django.db import connection

from tests.conftest import ServerProcess, auth, database_url, require_service
from tests.faults.instances import PrivatePostgres, fill, mount_tmpfs, unmount

BIG = "x" * 100_000  # toasted: each post extends the message table's TOAST relation
POSTERS = 2


class Poster(threading.Thread):
    """Posts ``post-<name>-<i>`` one after another; a post refused 507 is sent again with its
    id until it is stored (what a careful client does): every id ends up stored once."""

    def __init__(self, url: str, token: str, name: str, stop: threading.Event) -> None:
        super().__init__(daemon=True)
        self.http = httpx.Client(base_url=url, headers=auth(token), timeout=15)
        self.name_, self.stop = name, stop
        self.acked: list[str] = []
        self.answers: Counter[tuple[int, str | None]] = Counter()
        self.refused_since_full = 0
        self.acked_after_refusal = 0
        self.progress = threading.Condition()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            i = 0
            while not self.stop.is_set():
                message_id = f"post-{self.name_}-{i}"
                r = self.http.post(
                    "/api/v1/channels/full/messages/",
                    json={"id": message_id, "title": "t", "body": BIG},
                )
                code = r.json().get("error", {}).get("code") if r.status_code >= 400 else None
                with self.progress:
                    self.answers[(r.status_code, code)] += 1
                    if r.status_code == 201:
                        self.acked.append(message_id)
                        i += 1
                        if self.refused_since_full:
                            self.acked_after_refusal += 1
                    elif r.status_code == 507:
                        self.refused_since_full += 1
                    else:
                        raise AssertionError(f"{message_id}: {r.status_code} {r.text[:300]}")
                    self.progress.notify_all()
                if r.status_code == 507:
                    time.sleep(0.05)  # the client's back-off before it sends the same id again
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.failure = exc
            with self.progress:
                self.progress.notify_all()
        finally:
            self.http.close()

    def wait_for(self, condition, what: str, timeout: float = 30) -> None:
        with self.progress:
            ok = self.progress.wait_for(lambda: self.failure or condition(), timeout)
        assert self.failure is None, self.failure
        assert ok, f"{self.name_}: {what} within {timeout} s; answers {dict(self.answers)}"


def _listed(http: httpx.Client) -> list[str]:
    """Every message id of the channel, page by page (a page stops at
    AGENTCHAT_READ_MAX_BYTES: a few of these big messages)."""
    ids: list[str] = []
    after = 0
    for _ in range(200):
        r = http.get("/api/v1/channels/full/messages/", params={"after": after, "limit": 1000})
        assert r.status_code == 200, r.text
        page = r.json()
        ids += [m["id"] for m in page["messages"]]
        if not page["more"]:
            return ids
        after = page["messages"][-1]["seq"]
    raise AssertionError("more than 200 pages")


def test_postgres_disk_full_answers_507_keeps_reads_and_recovers(transactional_db, make_agent):
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL suite runs it (see the module's docstring)")
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "reader")}
    where = mount_tmpfs(48 * 1024 * 1024)
    require_service("a tmpfs mount (root)", where is not None, "mount -t tmpfs is not allowed here")
    assert where is not None
    pg = server = None
    stop = threading.Event()
    posters: list[Poster] = []
    try:
        pg = PrivatePostgres()
        space = where / "tablespace"
        space.mkdir()
        if os.geteuid() == 0:
            shutil.chown(space, "postgres", "postgres")
        pg.sql(f"CREATE TABLESPACE small LOCATION '{space}'")
        pg.copy_database(database_url(), "agentchat", tablespace="small")
        server = ServerProcess(
            env={"DATABASE_URL": pg.url("agentchat"), "DB_POOL_TIMEOUT": "2", "REDIS_URL": ""}
        )
        http = httpx.Client(base_url=server.url, headers=auth(tokens["reader"]), timeout=15)
        r = http.post("/api/v1/channels/", json={"name": "full"})
        assert r.status_code == 201, r.text
        posters = [Poster(server.url, tokens[n], n, stop) for n in ("alice", "bob")]
        for poster in posters:
            poster.start()
        for poster in posters:
            poster.wait_for(lambda p=poster: len(p.acked) >= 3, "3 posts stored")
        filler = fill(where)
        for poster in posters:
            poster.wait_for(lambda p=poster: p.refused_since_full >= 2, "two posts refused 507")
        # Reads keep working on the full disk; what was acknowledged is stored.
        acked_before = set()
        for poster in posters:
            with poster.progress:
                acked_before |= set(poster.acked)
        listed = _listed(http)
        assert acked_before <= set(listed), acked_before - set(listed)
        assert http.get("/api/v1/channels/full/").status_code == 200
        assert http.get("/api/v1/me/").status_code == 200
        # Space again: the same clients' writes succeed by themselves (no restart).
        filler.unlink()
        for poster in posters:
            poster.wait_for(lambda p=poster: p.acked_after_refusal >= 2, "posts stored again")
        stop.set()
        for poster in posters:
            poster.join(timeout=30)
            assert poster.failure is None, poster.failure
            assert set(poster.answers) <= {(201, None), (507, "STORAGE_FULL")}, poster.answers
        http.close()
        assert "INTERNAL_ERROR" not in server.output()
        acked = [mid for p in posters for mid in p.acked]
        with psycopg.connect(pg.url("agentchat")) as db, db.cursor() as cursor:
            cursor.execute(
                "SELECT m.id, m.seq, length(m.body) FROM channels_app_message m "
                "JOIN channels_app_channel c ON c.id = m.channel_id WHERE c.name = 'full' "
                "ORDER BY m.seq"
            )
            rows = cursor.fetchall()
            cursor.execute("SELECT last_seq FROM channels_app_channel WHERE name = 'full'")
            (last_seq,) = cursor.fetchone()
        assert sorted(mid for mid, _, _ in rows) == sorted(acked)  # each once, none refused
        assert [seq for _, seq, _ in rows] == list(range(1, len(rows) + 1))  # no gap
        assert last_seq == len(rows)  # the counter moved only with a stored message
        assert {size for _, _, size in rows} == {len(BIG)}  # nothing half-written
    finally:
        stop.set()
        for poster in posters:
            poster.join(timeout=30)
        if server is not None:
            server.stop()
        if pg is not None:
            pg.close()
        unmount(where)
