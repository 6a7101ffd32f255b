"""Concurrent writers of one whiteboard key, real clients against a real server: one of two
first writes creates the entry (201, never a 500 for the second insert), and after every round
of two simultaneous writes the entry is the last committed write, whole: its value, updated_by,
updated_at and audit_seq are that write's and its audit message's (the latest one)."""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from channels_app.models import Message, WhiteboardEntry
from channels_app.services import channel_create
from tests.conftest import auth

pytestmark = pytest.mark.django_db(transaction=True)

ROUNDS = 15


def _consistent() -> None:
    entry = WhiteboardEntry.objects.get(channel__name="race", key="goal")
    audit = (
        Message.objects.filter(channel__name="race", status="whiteboard.written")
        .order_by("-seq")
        .first()
    )
    assert audit is not None
    assert entry.audit_seq == audit.seq
    assert entry.updated_by == audit.sender
    assert entry.updated_at == audit.ts
    assert json.loads(audit.body)["value_json"] == entry.value_json
    assert json.loads(entry.value_json)["by"] == entry.updated_by


def test_two_writers_the_last_write_wins_whole(live, make_agent):
    channel_create(name="race", created_by="alice")
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob")}
    checked: list[int] = []

    def check() -> None:  # run by the last thread to reach the barrier: both writes are done
        _consistent()
        checked.append(1)

    start = threading.Barrier(2)
    done = threading.Barrier(2, action=check)
    statuses: dict[str, list[int]] = {"alice": [], "bob": []}
    errors: list[BaseException] = []

    def writer(name: str) -> None:
        try:
            with httpx.Client(base_url=live.url, headers=auth(tokens[name]), timeout=30) as http:
                for n in range(ROUNDS):
                    start.wait(timeout=30)
                    r = http.put(
                        "/api/v1/channels/race/whiteboard/goal/",
                        json={"value": {"by": name, "n": n}},
                    )
                    statuses[name].append(r.status_code)
                    done.wait(timeout=30)
        except BaseException as exc:
            errors.append(exc)
            start.abort()
            done.abort()

    threads = [threading.Thread(target=writer, args=(name,)) for name in tokens]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    assert len(checked) == ROUNDS
    every = statuses["alice"] + statuses["bob"]
    assert sorted(set(every)) == [200, 201]
    assert every.count(201) == 1  # exactly one of the two first writes created it
    assert Message.objects.filter(status="whiteboard.written").count() == 2 * ROUNDS
