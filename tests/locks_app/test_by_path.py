"""A lock named by one of its paths: ``DELETE locks/?path=`` and ``POST locks/recover/`` find the
record holding that exact normalized path through the entries' index, however many other locks
overlap it (a check lists 50)."""

from __future__ import annotations

import pytest

from channels_app.models import Message
from locks_app.models import PathLock
from tests.errors import error_code as code

pytestmark = pytest.mark.django_db

LOCKS = "/api/v1/channels/review/locks/"
BY_PATH = LOCKS + "recover/"


@pytest.fixture
def review(alice):
    r = alice.post("/api/v1/channels/", {"name": "review"}, format="json")
    assert r.status_code == 201, r.content


def lock(client, *paths, **extra):
    r = client.post(LOCKS, {"paths": list(paths), **extra}, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def recover(client, body):
    return client.post(BY_PATH, body, format="json")


def test_recover_by_path_takes_over_the_expired_lock_holding_it(alice, bob, review, clock):
    record = lock(alice, "src/", "docs/a.md", lease_seconds=1)
    clock.advance(5)
    r = recover(bob, {"path": "./docs//a.md", "reason": "stale", "lease_seconds": 60})
    assert r.status_code == 200, r.content
    body = r.json()
    assert (body["lock_id"], body["owner"], body["previous_owner"]) == (
        record["lock_id"],
        "bob",
        "alice",
    )
    assert body["recovery_reason"] == "stale"
    assert [entry["normalized_path"] for entry in body["paths"]] == ["src", "docs/a.md"]
    [audit] = Message.objects.filter(status="path.lock.recovered")
    assert audit.sender == "bob"


def test_recover_by_path_refusals(alice, bob, review, clock):
    lock(alice, "src")
    before = Message.objects.count()
    cases = [
        ({"reason": "x"}, "PATH_LOCK_INVALID_PATH"),
        ({"path": None, "reason": "x"}, "PATH_LOCK_INVALID_PATH"),
        ({"path": ["src"], "reason": "x"}, "PATH_LOCK_INVALID_PATH"),
        ({"path": "src", "reason": "x", "paths": ["src"]}, "UNKNOWN_FIELD"),
        ({"path": "nothing", "reason": ""}, "PATH_LOCK_INVALID_REASON"),
        ({"path": "nothing", "reason": "x"}, "PATH_LOCK_NOT_FOUND"),
        ({"path": "../x", "reason": "x"}, "PATH_LOCK_NOT_FOUND"),  # names no lock
        ({"path": "src/a.py", "reason": "x"}, "PATH_LOCK_NOT_FOUND"),  # not exactly held
        ({"path": "src", "reason": "x", "lease_seconds": -1}, "PATH_LOCK_NOT_STALE"),
    ]
    for body, want in cases:
        assert code(recover(bob, body)) == want, body
    assert code(bob.post("/api/v1/channels/nope/locks/recover/", {"path": "src", "reason": ""},
                         format="json")) == "CHANNEL_NOT_FOUND"  # fmt: skip
    clock.advance(400)
    r = recover(bob, {"path": "src", "reason": "x", "lease_seconds": "nan"})
    assert code(r) == "PATH_LOCK_INVALID_DURATION"
    assert Message.objects.count() == before
    assert PathLock.objects.get().owner == "alice"


def test_recover_is_not_taken_for_a_lock_id(alice, review):
    assert alice.get(BY_PATH).status_code == 405
    assert alice.delete(BY_PATH).status_code == 405


@pytest.fixture
def crowded(alice, bob, review, settings):
    """bob's 60 locks below ``docs/a.md`` in other letter cases and alice's ``docs/a.md``, all
    taken case-sensitively; then the case-insensitive setting is switched on, so that they all
    overlap ``docs/a.md`` (the one way locks come to overlap)."""
    mine = lock(alice, "docs/a.md", lease_seconds=1)["lock_id"]
    for i in range(60):
        lock(bob, f"Docs/A.md/n{i}")
    settings.AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE = True
    check = bob.post(LOCKS + "check/", {"paths": ["docs/a.md"]}, format="json").json()
    assert (check["conflicts_total"], check["truncated"]) == (61, True)
    return mine


def test_unlock_by_path_finds_the_lock_among_many_overlapping(alice, crowded):
    r = alice.delete(LOCKS, QUERY_STRING="path=DOCS/a.md")
    assert r.status_code == 200, r.content
    assert r.json()["lock_id"] == crowded
    assert PathLock.objects.count() == 60


def test_recover_by_path_finds_the_lock_among_many_overlapping(carol, crowded, clock):
    clock.advance(5)
    r = recover(carol, {"path": "docs/A.md", "reason": "stale"})
    # Found (not PATH_LOCK_NOT_FOUND), and refused: the recovered lock would overlap bob's.
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_CONFLICT")
    assert r.json()["error"]["detail"]["conflicts_total"] == 60


def test_a_path_held_by_several_records_names_them(alice, bob, review, settings, clock):
    first = lock(alice, "src/A.py", lease_seconds=1)["lock_id"]
    second = lock(bob, "SRC/a.py", lease_seconds=1)["lock_id"]
    settings.AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE = True
    clock.advance(5)
    for r in (
        recover(alice, {"path": "src/a.py", "reason": "x"}),
        alice.delete(LOCKS, QUERY_STRING="path=src/a.py"),
    ):
        assert code(r) == "PATH_LOCK_CONFLICT"
        assert sorted(r.json()["error"]["detail"]["lock_ids"]) == sorted([first, second])
