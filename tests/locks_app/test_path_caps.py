"""The caps on held lock entries (paths), per agent and per channel, and the bound on the
conflicts a 409 or a check answer lists: however many paths others hold, an answer lists at
most ``bounds.CONFLICTS_SHOWN`` locks and says how many overlap in all."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentchat.core.rules import clock as precise
from locks_app import bounds
from locks_app.models import PathLock
from tests.locks_app.test_api import LOCKS, check, code, lock, state

pytestmark = pytest.mark.django_db


@pytest.fixture
def review(alice):
    assert alice.post("/api/v1/channels/", {"name": "review"}, format="json").status_code == 201


def files(prefix: str, count: int) -> list[str]:
    return [f"{prefix}/f{n}.py" for n in range(count)]


@pytest.fixture
def caps(settings):
    settings.AGENTCHAT_PATH_LOCK_MAX_PATHS = 100
    settings.AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT = 64
    return settings


def test_the_default_per_agent_cap_allows_real_use_and_stops_a_flood(alice, bob, review):
    for n in range(4):  # 4 requests of 64 paths: 256
        assert lock(alice, *files(f"a{n}", 64)).status_code == 201
    before = state()
    r = lock(alice, "z.py")
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_TOO_MANY_PATHS")
    assert r.json()["error"]["detail"] == {
        "held": 256,
        "requested": 1,
        "limit": 256,
        "scope": "agent",
    }
    assert state() == before
    assert lock(bob, "b.py").status_code == 201  # alice's paths leave bob his own


def test_the_channel_cap_holds_across_agents(api_for, review, caps):
    assert lock(api_for("alice"), *files("a", 64)).status_code == 201
    assert lock(api_for("bob"), *files("b", 36)).status_code == 201
    r = lock(api_for("carol"), "c.py")
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_TOO_MANY_PATHS")
    assert r.json()["error"]["detail"] == {
        "held": 100,
        "requested": 1,
        "limit": 100,
        "scope": "channel",
    }


def test_expired_locks_count_towards_their_owner_only(api_for, review, caps, clock):
    alice, bob, carol = api_for("alice"), api_for("bob"), api_for("carol")
    held = lock(alice, *files("a", 64), lease_seconds=60).json()["lock_id"]
    assert lock(bob, *files("b", 36), lease_seconds=60).status_code == 201
    assert code(lock(carol, "c.py")) == "PATH_LOCK_TOO_MANY_PATHS"
    clock.advance(60)
    assert lock(carol, *files("c", 64)).status_code == 201  # the channel counts unexpired only
    r = lock(alice, "x.py")
    assert r.json()["error"]["detail"]["scope"] == "agent"  # alice's expired paths are hers
    assert alice.delete(f"{LOCKS}{held}/").status_code == 200
    assert lock(alice, "x.py").status_code == 201


def test_a_recovery_counts_towards_the_new_owners_cap(api_for, review, caps, clock):
    alice, bob = api_for("alice"), api_for("bob")
    stale = lock(alice, "old.py", lease_seconds=60).json()["lock_id"]
    assert lock(bob, *files("b", 64)).status_code == 201
    clock.advance(61)
    r = bob.post(f"{LOCKS}{stale}/recover/", {"reason": "alice left"}, format="json")
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_TOO_MANY_PATHS")
    r = api_for("carol").post(f"{LOCKS}{stale}/recover/", {"reason": "x"}, format="json")
    assert r.status_code == 200, r.content


@pytest.fixture
def crowded(api_for, review, settings):
    """More locks under src/ than an answer lists, one path each, across agents."""
    settings.AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT = 40
    held = bounds.CONFLICTS_SHOWN + 10
    for n in range(held):
        owner = api_for(f"agent{n % 2}")
        assert lock(owner, f"src/f{n}.py").status_code == 201
    return held


def test_a_conflict_lists_the_first_locks_and_counts_all(api_for, crowded):
    bob = api_for("bob")
    r = lock(bob, "src")
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_CONFLICT")
    detail = r.json()["error"]["detail"]
    assert len(detail["conflicts"]) == bounds.CONFLICTS_SHOWN
    assert (detail["conflicts_total"], detail["truncated"]) == (crowded, True)
    ids = [c["lock_id"] for c in detail["conflicts"]]
    assert ids == sorted(PathLock.objects.values_list("lock_id", flat=True))[: len(ids)]


def test_a_check_lists_the_first_locks_and_counts_all(api_for, crowded):
    body = check(api_for("bob"), "**").json()
    assert len(body["conflicts"]) == bounds.CONFLICTS_SHOWN
    assert (body["conflicts_total"], body["truncated"]) == (crowded, True)
    assert check(api_for("bob"), "src/f1.py").json().keys() == {"conflicts"}  # not cut


def test_an_expired_lock_past_the_listed_ones_still_asks_for_recovery(api_for, crowded):
    last = PathLock.objects.order_by("-lock_id").first()
    last.expires_at = precise.now() - timedelta(seconds=1)
    last.save(update_fields=["expires_at"])
    r = lock(api_for("bob"), "src")
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_RECOVERY_REQUIRED")
    listed = r.json()["error"]["detail"]["conflicts"]
    assert last.lock_id not in {c["lock_id"] for c in listed}
