"""Real concurrent clients against a real daphne process (SQLite or PostgreSQL)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from channels_app.models import Message
from locks_app.models import PathLock, PathLockEntry
from tests.conftest import auth

# Sixteen requests, every two of which overlap (each holds a path on the chain
# . ⊃ src ⊃ src/a ⊃ src/a/b.py, or a pattern covering src/a/b.py), so exactly one can win.
REQUESTS = [
    ["."],
    ["src"],
    ["src/"],
    ["./src//a"],
    ["src/a/b.py"],
    ["src/a/b.py", "docs/readme.md"],
    ["docs/guide.md", "src/a"],
    ["src/**"],
    ["**/b.py"],
    ["src/*/b.py"],
    ["src/a/b.py/"],
    ["src/?/b.py"],
    ["src/[a-c]/b.py", "tests/t.py"],
    ["src/a/**/b.py"],
    ["*"],
    ["src/a/b.py", "src/a/c.py"],
]


def test_sixteen_concurrent_lockers_of_overlapping_paths_have_one_winner(live, make_agent):
    tokens = [make_agent(f"locker{i}")[1] for i in range(16)]
    for round_number in range(3):
        channel = f"locks{round_number}"
        r = httpx.post(
            f"{live.url}/api/v1/channels/", json={"name": channel}, headers=auth(tokens[0])
        )
        assert r.status_code == 201, r.text
        barrier = threading.Barrier(16)

        def attempt(index, channel=channel, barrier=barrier):
            with httpx.Client(base_url=live.url, headers=auth(tokens[index]), timeout=60) as http:
                barrier.wait()
                r = http.post(
                    f"/api/v1/channels/{channel}/locks/",
                    json={"paths": REQUESTS[index], "lease_seconds": 60},
                )
                return r.status_code, r.json()

        with ThreadPoolExecutor(16) as pool:
            results = list(pool.map(attempt, range(16)))
        winners = [body for status, body in results if status == 201]
        losers = [body for status, body in results if status != 201]
        assert len(winners) == 1, results
        assert {status for status, _ in results} == {201, 409}
        assert {body["error"]["code"] for body in losers} == {"PATH_LOCK_CONFLICT"}
        winner = winners[0]
        for body in losers:
            assert [c["lock_id"] for c in body["error"]["detail"]["conflicts"]] == [
                winner["lock_id"]
            ]
        locks = PathLock.objects.filter(channel__name=channel)
        assert [lock.lock_id for lock in locks] == [winner["lock_id"]]
        assert PathLockEntry.objects.filter(channel__name=channel).count() == len(winner["paths"])
        audits = Message.objects.filter(channel__name=channel, kind=Message.Kind.AUDIT)
        assert [(m.status, m.sender) for m in audits] == [("path.locked", winner["owner"])]
        assert json.loads(audits[0].body)["lock_id"] == winner["lock_id"]
    assert "database is locked" not in live.output()
    assert "Traceback" not in live.output()
