"""kill -9 of a server process in the middle of bursts of posts, claims and lock acquisitions
from clients that retry (docs/deployment.md, "Faults"): afterwards every acknowledged write
exists exactly once, seqs have no gap or duplicate, no lease or lock is half-written and every
mutation has its audit message.

On SQLite one process is killed and another started on the same file; on PostgreSQL (the
suite's, with Redis when REDIS_URL is set) one of two processes is killed while the other goes
on serving. Each suite runs the variant of its database: both run in .ci/run.
"""

from __future__ import annotations

import time

from django.db import connection

from tests.conftest import ServerProcess
from tests.faults.harness import Clients, Retrying
from tests.faults.workload import Acked, check_nothing_lost, claimer, locker, poster, prepare

POSTS = 40  # per poster
TASKS = 16
LOCKS = 16


def test_kill_9_mid_burst_loses_nothing_acknowledged(transactional_db, make_agent):
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol", "dave")}
    two = connection.vendor != "sqlite"
    servers = [ServerProcess() for _ in range(2 if two else 1)]
    live = [s.url for s in servers]
    client = Retrying(lambda: list(live), deadline=time.monotonic() + 60)
    replacement: ServerProcess | None = None
    try:
        task_ids = prepare(client, tokens["alice"], tasks=TASKS)
        acked = Acked()
        clients = Clients(
            [
                poster(client, tokens["alice"], acked, "alice", POSTS),
                poster(client, tokens["bob"], acked, "bob", POSTS),
                claimer(client, tokens["carol"], acked, task_ids),
                locker(client, tokens["dave"], acked, [f"src/f{i}.py" for i in range(LOCKS)]),
            ]
        )
        acked.wait_for(20, timeout=30)  # mid-burst: some writes answered, most to come
        victim = servers[0]
        victim.kill()  # SIGKILL: no shutdown code runs, transactions in flight die
        live.remove(victim.url)
        if not two:
            replacement = ServerProcess()  # the same SQLite file, as a supervisor restarts it
            live.append(replacement.url)
        clients.join(timeout=60)
        assert not client.faults, client.faults
        assert len(acked.posts) == 2 * POSTS
        assert acked.claims == set(task_ids)
        assert len(acked.locks) == LOCKS
        with connection.cursor() as cursor:
            check_nothing_lost(cursor, acked, claimer_name="carol", locker_name="dave")
            if connection.vendor == "sqlite":
                cursor.execute("PRAGMA integrity_check")
                assert cursor.fetchone()[0] == "ok"
    finally:
        for server in [*servers, *([replacement] if replacement else [])]:
            server.stop()
