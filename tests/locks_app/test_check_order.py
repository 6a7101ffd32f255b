"""Which refusal wins when several inputs of a lock request are bad: the reference's order
(identity, then paths or reason, then state, then the duration), with the channel before all of
them. The views parse paths, reasons and durations before they call the services; these pin
that the order survived the move."""

from __future__ import annotations

import pytest

from channels_app.models import Message
from locks_app.models import PathLock
from tests.errors import error_code as code

pytestmark = pytest.mark.django_db

LOCKS = "/api/v1/channels/review/locks/"
HIDDEN = "/api/v1/channels/secret/locks/"


@pytest.fixture
def review(alice, bob):
    for name, visibility in (("review", "open"), ("secret", "members")):
        r = alice.post("/api/v1/channels/", {"name": name, "visibility": visibility}, format="json")
        assert r.status_code == 201, r.content


def raw_post(client, url: str, body: str):
    return client.generic("POST", url, body.encode(), content_type="application/json")


def expired_lock(client, clock, path: str) -> str:
    r = client.post(LOCKS, {"paths": [path], "lease_seconds": 1}, format="json")
    assert r.status_code == 201, r.content
    clock.advance(5)
    return r.json()["lock_id"]


@pytest.mark.parametrize(
    ("paths", "lease"), [('["../x"]', "-1"), ('"src"', '"nan"'), ('["a", "a/b"]', "null")]
)
def test_a_hidden_channel_wins_over_bad_paths_and_durations(review, bob, paths, lease):
    before = Message.objects.count()
    r = raw_post(bob, HIDDEN, f'{{"paths": {paths}, "lease_seconds": {lease}}}')
    assert (r.status_code, code(r)) == (404, "CHANNEL_NOT_FOUND")
    r = raw_post(bob, HIDDEN + "check/", f'{{"paths": {paths}}}')
    assert (r.status_code, code(r)) == (404, "CHANNEL_NOT_FOUND")
    assert Message.objects.count() == before


@pytest.mark.parametrize(
    "lease", ["-5", "0", '"nan"', '"inf"', "NaN", "true", "null", '"300"', "[1]", "1e12"]
)
def test_a_conflict_wins_over_any_bad_duration(review, alice, bob, lease):
    # "nan" and "inf" are what the CLI sends for the durations JSON cannot carry.
    assert alice.post(LOCKS, {"paths": ["src"]}, format="json").status_code == 201
    r = raw_post(bob, LOCKS, f'{{"paths": ["src/a.py"], "lease_seconds": {lease}}}')
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_CONFLICT")
    r = raw_post(bob, LOCKS, f'{{"paths": ["other"], "lease_seconds": {lease}}}')
    assert (r.status_code, code(r)) == (400, "PATH_LOCK_INVALID_DURATION")


def test_bad_paths_win_over_a_bad_duration(review, bob):
    r = raw_post(bob, LOCKS, '{"paths": ["../x"], "lease_seconds": "nan"}')
    assert code(r) == "PATH_LOCK_INVALID_PATH"
    r = raw_post(bob, LOCKS, '{"paths": ["a", "a/b"], "lease_seconds": -1}')
    assert code(r) == "PATH_LOCK_CONFLICT"
    assert not PathLock.objects.exists()


@pytest.mark.parametrize("reason", ['""', "null", "5", '"two\\nlines"'])
def test_a_bad_reason_wins_over_target_state_and_duration(review, alice, bob, clock, reason):
    lock_id = expired_lock(alice, clock, "src")
    active = alice.post(LOCKS, {"paths": ["docs"]}, format="json").json()["lock_id"]
    for url in (
        f"{LOCKS}{'f' * 32}/recover/",  # no such lock
        f"{LOCKS}{active}/recover/",  # not stale
        f"{LOCKS}{lock_id}/recover/",  # a bad duration too
        f"{HIDDEN}{lock_id}/recover/",  # but the channel first
    ):
        r = raw_post(bob, url, f'{{"reason": {reason}, "lease_seconds": -1}}')
        want = "CHANNEL_NOT_FOUND" if url.startswith(HIDDEN) else "PATH_LOCK_INVALID_REASON"
        assert code(r) == want, url


def test_recovery_state_wins_over_a_bad_duration(review, alice, bob, clock):
    active = alice.post(LOCKS, {"paths": ["docs"]}, format="json").json()["lock_id"]
    r = raw_post(bob, f"{LOCKS}{active}/recover/", '{"reason": "x", "lease_seconds": "nan"}')
    assert code(r) == "PATH_LOCK_NOT_STALE"
    r = raw_post(bob, f"{LOCKS}{'f' * 32}/recover/", '{"reason": "x", "lease_seconds": 0}')
    assert code(r) == "PATH_LOCK_NOT_FOUND"
    lock_id = expired_lock(alice, clock, "src")
    r = raw_post(bob, f"{LOCKS}{lock_id}/recover/", '{"reason": "x", "lease_seconds": "nan"}')
    assert code(r) == "PATH_LOCK_INVALID_DURATION"
    assert PathLock.objects.get(lock_id=lock_id).owner == "alice"
