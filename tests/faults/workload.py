"""A burst of writes from retrying clients, and what must hold afterwards (tests/faults/).

Posts carry their own ``id`` (a retry of a post that committed answers 200 with the first
message); claims and lock acquisitions are retried by their owner: a retry of one that had
committed finds the task or the path already its caller's, which counts as acknowledged.
``check_nothing_lost`` reads the database with plain SQL (so that it works on the test
database and on a private PostgreSQL alike).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.errors import code_or_none
from tests.faults.harness import Retrying

CHANNEL = "faults"


@dataclass
class Acked:
    posts: dict[str, int] = field(default_factory=dict)  # message id -> seq answered
    attempted: set[str] = field(default_factory=set)
    claims: set[str] = field(default_factory=set)  # task ids
    locks: dict[str, str] = field(default_factory=dict)  # path -> lock_id
    lock: threading.Lock = field(default_factory=threading.Lock)
    progress: threading.Condition = field(default_factory=threading.Condition)

    def count(self) -> int:
        return len(self.posts) + len(self.claims) + len(self.locks)

    def tick(self) -> None:
        with self.progress:
            self.progress.notify_all()

    def wait_for(self, n: int, timeout: float) -> None:
        with self.progress:
            ok = self.progress.wait_for(lambda: self.count() >= n, timeout)
        assert ok, f"only {self.count()} writes acknowledged in {timeout} s (wanted {n})"


def prepare(client: Retrying, token: str, *, tasks: int) -> list[str]:
    """The channel and its tasks; returns the task ids."""
    r = client.send("POST", "/api/v1/channels/", token, {"name": CHANNEL})
    assert r.status_code in (200, 201), r.text
    ids = [f"t{i}" for i in range(tasks)]
    for task_id in ids:
        r = client.send(
            "POST", f"/api/v1/channels/{CHANNEL}/tasks/", token, {"id": task_id, "title": task_id}
        )
        assert r.status_code == 201 or code_or_none(r) == "TASK_ALREADY_EXISTS", r.text
    return ids


def poster(client: Retrying, token: str, acked: Acked, name: str, n: int) -> Callable[[], None]:
    def run() -> None:
        for i in range(n):
            message_id = f"{name}-{i}"
            with acked.lock:
                acked.attempted.add(message_id)
            r = client.send(
                "POST",
                f"/api/v1/channels/{CHANNEL}/messages/",
                token,
                {"id": message_id, "title": f"post {i} of {name}"},
            )
            assert r.status_code in (200, 201), r.text
            with acked.lock:
                acked.posts[message_id] = r.json()["seq"]
            acked.tick()

    return run


def claimer(client: Retrying, token: str, acked: Acked, tasks: list[str]) -> Callable[[], None]:
    def run() -> None:
        for task_id in tasks:
            r = client.send(
                "POST",
                f"/api/v1/channels/{CHANNEL}/tasks/{task_id}/claim/",
                token,
                {"lease_seconds": 3600},
            )
            assert r.status_code == 200, r.text
            with acked.lock:
                acked.claims.add(task_id)
            acked.tick()

    return run


def locker(client: Retrying, token: str, acked: Acked, paths: list[str]) -> Callable[[], None]:
    def run() -> None:
        for path in paths:
            r = client.send(
                "POST",
                f"/api/v1/channels/{CHANNEL}/locks/",
                token,
                {"paths": [path], "lease_seconds": 3600},
            )
            if r.status_code == 409:
                # An earlier attempt committed and its answer was lost: the path is ours.
                r = client.send(
                    "POST", f"/api/v1/channels/{CHANNEL}/locks/check/", token, {"paths": [path]}
                )
                conflicts = r.json()["conflicts"]
                assert len(conflicts) == 1, r.text
                lock_id = conflicts[0]["lock_id"]
            else:
                assert r.status_code == 201, r.text
                lock_id = r.json()["lock_id"]
            with acked.lock:
                acked.locks[path] = lock_id
            acked.tick()

    return run


def check_nothing_lost(cursor: Any, acked: Acked, *, claimer_name: str, locker_name: str) -> None:
    """Every acknowledged write exactly once, seqs without gap or duplicate, no lease or lock
    half-written, every mutation with its audit message."""

    def rows(sql: str, *params: Any) -> list[tuple[Any, ...]]:
        cursor.execute(sql, params)
        return list(cursor.fetchall())

    ((channel_id, last_seq),) = rows(
        "SELECT id, last_seq FROM channels_app_channel WHERE name = %s", CHANNEL
    )
    messages = rows(
        "SELECT id, seq, status, title, body FROM channels_app_message WHERE channel_id = %s",
        channel_id,
    )
    seqs = sorted(seq for _, seq, _, _, _ in messages)
    assert seqs == list(range(1, len(seqs) + 1)), "seqs with a gap or a duplicate"
    assert last_seq == len(seqs)
    by_id = {mid: seq for mid, seq, _, _, _ in messages}
    assert len(by_id) == len(messages)
    for message_id, seq in acked.posts.items():
        assert by_id.get(message_id) == seq, f"acknowledged post {message_id} lost or moved"
    posted = {mid for mid, _, status, _, _ in messages if status == "discussion"}
    assert posted <= acked.attempted, "a post that nobody sent"

    audits = [(status, title, body) for _, _, status, title, body in messages]
    # Tasks: a lease exists exactly when the task is in progress, owned by its holder, with
    # its lease.claimed audit message; every acknowledged claim holds.
    tasks = dict(
        rows(
            "SELECT task_id, status || ':' || owner FROM tasks_app_task WHERE channel_id = %s",
            channel_id,
        )
    )
    leases = dict(
        rows(
            "SELECT t.task_id, l.owner FROM tasks_app_lease l "
            "JOIN tasks_app_task t ON t.id = l.task_id WHERE t.channel_id = %s",
            channel_id,
        )
    )
    claimed_audits = {
        title.split(" ", 1)[1] for status, title, _ in audits if status == "lease.claimed"
    }
    for task_id, state in tasks.items():
        if task_id in leases:
            assert state == f"in_progress:{leases[task_id]}", (task_id, state)
            assert task_id in claimed_audits, f"lease of {task_id} without its audit message"
        else:
            assert state == "open:", f"task {task_id} {state} without a lease"
            assert task_id not in claimed_audits, f"audit of a claim of {task_id} that is not"
    for task_id in acked.claims:
        assert leases.get(task_id) == claimer_name, f"acknowledged claim of {task_id} lost"

    # Locks: each acknowledged path held by exactly one record of the locker, every record
    # with its entries and its path.locked audit message.
    records = rows(
        "SELECT id, lock_id, owner FROM locks_app_pathlock WHERE channel_id = %s", channel_id
    )
    entries = rows(
        "SELECT e.lock_id, e.normalized_path FROM locks_app_pathlockentry e "
        "JOIN locks_app_pathlock p ON p.id = e.lock_id WHERE p.channel_id = %s",
        channel_id,
    )
    paths_of: dict[Any, list[str]] = {}
    for pk, path in entries:
        paths_of.setdefault(pk, []).append(path)
    locked_audits = "\n".join(body for status, _, body in audits if status == "path.locked")
    by_path: dict[str, list[str]] = {}
    for pk, lock_id, owner in records:
        assert owner == locker_name
        assert paths_of.get(pk), f"lock {lock_id} without its paths"
        assert lock_id in locked_audits, f"lock {lock_id} without its audit message"
        for path in paths_of[pk]:
            by_path.setdefault(path, []).append(lock_id)
    for path, holders in by_path.items():
        assert len(holders) == 1, f"{path} locked twice: {holders}"
    for path, lock_id in acked.locks.items():
        assert by_path.get(path) == [lock_id], f"acknowledged lock of {path} lost"
    assert len([1 for status, _, _ in audits if status == "path.locked"]) == len(records), (
        "a path.locked audit message without its lock"
    )
