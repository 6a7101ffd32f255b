"""PostgreSQL restarted under load (docs/deployment.md, "Faults"): while it is down, clients
get 503 ``DATABASE_UNAVAILABLE`` with ``Retry-After`` (never a 500, never a hang: a request
waits at most ``DB_POOL_TIMEOUT`` for a connection); once it is back the server serves again
by itself (the psycopg pool reconnects), and nothing acknowledged is lost.

On a private PostgreSQL (``tests/faults/instances.py``): the shared one is never restarted. It
runs in the PostgreSQL suite only: the private instance is a copy of that suite's migrated
test database (pg_dump, in a second), where the SQLite suite has none and would spend its
time on migrations; .ci/run runs the PostgreSQL suite, so the test runs once per CI run.
"""

from __future__ import annotations

import time

import httpx
import psycopg
import pytest
from django.db import connection

from tests.conftest import ServerProcess, database_url
from tests.faults.harness import Clients, Retrying
from tests.faults.instances import PrivatePostgres
from tests.faults.workload import (
    CHANNEL,
    Acked,
    check_nothing_lost,
    claimer,
    locker,
    poster,
    prepare,
)

POSTS = 40


def test_postgres_restart_answers_503_then_recovers_and_loses_nothing(transactional_db, make_agent):
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL suite runs it (see the module's docstring)")
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol", "dave")}
    pg = PrivatePostgres()
    server = None
    try:
        pg.copy_database(database_url(), "agentchat")
        server = ServerProcess(
            env={"DATABASE_URL": pg.url("agentchat"), "DB_POOL_TIMEOUT": "2", "REDIS_URL": ""}
        )
        client = Retrying(lambda: [server.url], deadline=time.monotonic() + 60)
        task_ids = prepare(client, tokens["alice"], tasks=12)
        acked = Acked()
        clients = Clients(
            [
                poster(client, tokens["alice"], acked, "alice", POSTS),
                poster(client, tokens["bob"], acked, "bob", POSTS),
                claimer(client, tokens["carol"], acked, task_ids),
                locker(client, tokens["dave"], acked, [f"src/f{i}.py" for i in range(12)]),
            ]
        )
        acked.wait_for(15, timeout=30)
        pg.stop("immediate")  # a crash of PostgreSQL: its connections die mid-transaction
        # While it is down: a read and a write answer 503 with Retry-After, in bounded time.
        for method, body in (("GET", None), ("POST", {"title": "while down", "id": "down-1"})):
            r = httpx.request(
                method,
                f"{server.url}/api/v1/channels/{CHANNEL}/messages/",
                json=body,
                headers={"Authorization": f"Bearer {tokens['alice']}"},
                timeout=15,
            )
            assert r.status_code == 503, r.text
            assert r.json()["error"]["code"] == "DATABASE_UNAVAILABLE"
            assert int(r.headers["Retry-After"]) >= 1
        pg.start()
        clients.join(timeout=60)
        assert not client.faults, client.faults
        assert client.statuses[(503, "DATABASE_UNAVAILABLE")] >= 1, dict(client.statuses)
        assert len(acked.posts) == 2 * POSTS
        assert acked.claims == set(task_ids)
        assert len(acked.locks) == 12
        with psycopg.connect(pg.url("agentchat")) as db, db.cursor() as cursor:
            check_nothing_lost(cursor, acked, claimer_name="carol", locker_name="dave")
            cursor.execute("SELECT count(*) FROM channels_app_message WHERE id = 'down-1'")
            assert cursor.fetchone() == (0,)  # refused while down: not written
        assert "INTERNAL_ERROR" not in server.output()
    finally:
        if server is not None:
            server.stop()
        pg.close()
