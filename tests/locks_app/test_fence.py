"""Fencing tokens of path locks (docs/locks.md, "Fencing tokens"): a per-channel counter hands
out a growing fence on every acquisition and recovery; an unlock with an old fence is refused
(STALE_FENCE, before the owner check); the check endpoint by path; members-only."""

from __future__ import annotations

import json

import pytest

from channels_app.models import Channel, Message
from locks_app import services
from locks_app.models import LockFence
from tests.errors import error_code

pytestmark = pytest.mark.django_db

LOCKS = "/api/v1/channels/review/locks/"


@pytest.fixture
def review(alice):
    assert alice.post("/api/v1/channels/", {"name": "review"}, format="json").status_code == 201
    return Channel.objects.get(name="review")


def lock(client, *paths, **extra):
    response = client.post(LOCKS, {"paths": list(paths), **extra}, format="json")
    assert response.status_code == 201, response.content
    return response.json()


def fence_of(client, path, fence):
    return client.get(LOCKS + "fence/", {"path": path, "fence": fence})


def test_fences_grow_per_channel_across_locks_owners_and_recoveries(alice, bob, review, clock):
    first = lock(alice, "src/a.py", lease_seconds=5)
    assert first["fence"] == 1
    assert json.loads(Message.objects.order_by("-seq")[0].body)["fence"] == 1
    assert lock(bob, "docs/")["fence"] == 2
    clock.advance(6)
    r = bob.post(f"{LOCKS}{first['lock_id']}/recover/", {"reason": "alice paused"}, format="json")
    assert r.status_code == 200, r.content
    assert r.json()["fence"] == 3
    assert json.loads(Message.objects.order_by("-seq")[0].body)["fence"] == 3
    r = bob.delete(f"{LOCKS}{first['lock_id']}/?fence=3")
    assert r.status_code == 200, r.content
    # The lock row is gone; a new lock on the same path still gets a later fence.
    assert lock(alice, "src/a.py")["fence"] == 4
    assert LockFence.objects.get(channel=review).last_fence == 4


def test_an_unlock_with_a_stale_fence_is_refused_before_the_owner_check(alice, bob, review, clock):
    first = lock(alice, "src/a.py", lease_seconds=5)
    clock.advance(6)
    r = alice.post(f"{LOCKS}{first['lock_id']}/recover/", {"reason": "me again"}, format="json")
    assert r.json()["fence"] == 2
    for who in (alice, bob):
        r = who.delete(f"{LOCKS}?path=src/a.py&fence=1")
        assert (r.status_code, error_code(r)) == (409, "STALE_FENCE"), r.content
        assert r.json()["error"]["detail"]["current_fence"] == 2
    assert error_code(bob.delete(f"{LOCKS}?path=src/a.py")) == "PATH_LOCK_OWNER_MISMATCH"
    r = alice.delete(f"{LOCKS}{first['lock_id']}/?fence=2")
    assert r.status_code == 200 and r.json()["fence"] == 2


@pytest.mark.parametrize("raw", ["", "%D9%A1", "1.0", "true", "-1", "%ED%A0%80", "9" * 30])
def test_a_hostile_fence_is_invalid_fence(alice, review, raw):
    record = lock(alice, "src/a.py")
    for response in (
        alice.get(f"{LOCKS}fence/?path=src/a.py&fence={raw}"),
        alice.delete(f"{LOCKS}{record['lock_id']}/?fence={raw}"),
    ):
        assert response.status_code == 400, response.content
        assert error_code(response) == "INVALID_FENCE"


def test_the_check_by_path_answers_current_expired_and_stale(alice, bob, review, clock):
    assert fence_of(bob, "src/a.py", 1).json()["state"] == "stale"  # never handed out
    record = lock(alice, "src/a.py", "lib/**", lease_seconds=5)
    answer = fence_of(bob, "lib/**", 1).json()
    assert answer == {
        "path": "lib/**",
        "lock_id": record["lock_id"],
        "fence": 1,
        "checked": 1,
        "state": "current",
        "owner": "alice",
        "expires_at": record["expires_at"],
    }
    clock.advance(6)
    assert fence_of(bob, "src/a.py", 1).json()["state"] == "expired"
    bob.post(f"{LOCKS}recover/", {"path": "src/a.py", "reason": "alice paused"}, format="json")
    assert fence_of(bob, "src/a.py", 1).json()["state"] == "stale"
    assert fence_of(bob, "src/a.py", 2).json()["state"] == "current"
    bob.delete(f"{LOCKS}?path=src/a.py")
    gone = fence_of(bob, "src/a.py", 2).json()
    assert (gone["state"], gone["fence"], gone["lock_id"]) == ("expired", None, None)


def test_the_check_is_members_only(alice, bob, carol, review):
    Channel.objects.filter(name="review").update(visibility="members", members=["alice", "bob"])
    lock(alice, "src/a.py")
    assert fence_of(bob, "src/a.py", 1).status_code == 200
    assert fence_of(carol, "src/a.py", 1).status_code == 404


def test_an_admin_force_release_bumps_the_counter(alice, review):
    record = lock(alice, "src/a.py")
    services.lock_force_release(
        channel=review, lock_id=record["lock_id"], actor="admin", reason="gone"
    )
    assert fence_of(alice, "src/a.py", 1).json()["state"] == "expired"
    assert lock(alice, "src/a.py")["fence"] == 3
