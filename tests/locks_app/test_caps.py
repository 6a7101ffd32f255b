"""The caps on held lock entries that start with a wildcard: one agent at its own cap leaves
room for the others, and expired locks count towards their owner's cap only, never the
channel's (a controlled clock makes them expire)."""

from __future__ import annotations

import pytest

from tests.locks_app.test_api import LOCKS, code, lock, state

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(api_for):
    return api_for("alice")


@pytest.fixture
def bob(api_for):
    return api_for("bob")


@pytest.fixture
def review(alice):
    assert alice.post("/api/v1/channels/", {"name": "review"}, format="json").status_code == 201


@pytest.fixture
def caps(settings):
    settings.AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS = 4
    settings.AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS_PER_AGENT = 2
    return settings


def test_an_agent_at_its_cap_cannot_starve_another(alice, bob, review, caps):
    assert lock(alice, "a*.txt", "b*.txt").status_code == 201
    before = state()
    r = lock(alice, "c*.txt")
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_TOO_MANY_PATTERNS")
    assert r.json()["error"]["detail"] == {"held": 2, "requested": 1, "limit": 2, "scope": "agent"}
    assert state() == before
    # alice's locks leave bob his own share of the channel's patterns
    assert lock(bob, "*.md", "*.json").status_code == 201


def test_the_default_per_agent_cap_is_below_the_channels(alice, bob, review):
    assert lock(alice, *[f"{c}*.txt" for c in "abcdefgh"]).status_code == 201
    r = lock(alice, "z*.txt")
    assert (r.status_code, r.json()["error"]["detail"]["scope"]) == (409, "agent")
    assert lock(bob, "*.md").status_code == 201


def test_the_channel_cap_still_holds_across_agents(api_for, review, caps):
    for name, paths in (("alice", ["a*", "b*"]), ("bob", ["c*", "d*"])):
        assert lock(api_for(name), *paths).status_code == 201
    r = lock(api_for("carol"), "e*")
    assert (r.status_code, code(r)) == (409, "PATH_LOCK_TOO_MANY_PATTERNS")
    assert r.json()["error"]["detail"] == {
        "held": 4,
        "requested": 1,
        "limit": 4,
        "scope": "channel",
    }


def test_expired_locks_do_not_count_towards_the_channels_cap(api_for, review, caps, clock):
    for name, paths in (("alice", ["a*", "b*"]), ("bob", ["c*", "d*"])):
        assert lock(api_for(name), *paths, lease_seconds=60).status_code == 201
    carol = api_for("carol")
    assert code(lock(carol, "e*")) == "PATH_LOCK_TOO_MANY_PATTERNS"
    clock.advance(60)  # expired exactly at their expiry
    assert lock(carol, "e*", "f*").status_code == 201


def test_an_agents_expired_locks_count_towards_its_own_cap_until_it_unlocks(
    alice, review, caps, clock
):
    held = lock(alice, "a*", "b*", lease_seconds=60).json()["lock_id"]
    clock.advance(61)
    # still held: they conflict and are compared by every request; alice may unlock them
    assert lock(alice, "c*").json()["error"]["detail"]["scope"] == "agent"
    assert alice.delete(f"{LOCKS}{held}/").status_code == 200
    assert lock(alice, "c*").status_code == 201


def test_recovering_an_expired_lock_is_held_to_the_caps(api_for, review, caps, clock):
    alice, bob, carol, dave = (api_for(name) for name in ("alice", "bob", "carol", "dave"))
    expired = lock(alice, "a*", "b*", lease_seconds=60).json()["lock_id"]
    clock.advance(61)
    assert lock(bob, "c*", "d*").status_code == 201
    assert lock(carol, "e*", "f*").status_code == 201
    url = f"{LOCKS}{expired}/recover/"
    before = state()
    # bob is at his own cap; for dave, recovering would make five unexpired in the channel
    for client, scope in ((bob, "agent"), (dave, "channel")):
        r = client.post(url, {"reason": "alice left"}, format="json")
        assert (r.status_code, code(r)) == (409, "PATH_LOCK_TOO_MANY_PATTERNS")
        assert r.json()["error"]["detail"]["scope"] == scope
    assert state() == before
    assert carol.delete(f"{LOCKS}?path=e*").status_code == 200
    # e* and f* are one lock: releasing by e* released f* with it.
    r = carol.delete(f"{LOCKS}?path=f*")
    assert (r.status_code, code(r)) == (404, "PATH_LOCK_NOT_FOUND")
    r = dave.post(url, {"reason": "alice left"}, format="json")
    assert (r.status_code, r.json()["owner"]) == (200, "dave")


def test_the_schema_declares_the_cap_where_it_is_answered(api_client):
    import json

    document = json.loads(api_client.get("/api/v1/schema/?format=json").content)
    by_id = {
        operation["operationId"]: operation["x-error-codes"]
        for item in document["paths"].values()
        for operation in item.values()
        if isinstance(operation, dict) and "operationId" in operation
    }
    for operation_id in ("locks_lock", "locks_recover"):
        assert "PATH_LOCK_TOO_MANY_PATTERNS" in by_id[operation_id], operation_id


def test_sub_agents_share_their_parents_cap(api_for, alice, review, caps):
    """A parent's token acting as sub-agents (AgentChat-As) is one namespace: its root's cap
    counts them all, so they cannot fill the channel's allowance for the others."""
    mallory = api_for("mallory")
    assert lock(mallory, "a*.py").status_code == 201
    for n, path in enumerate(("b*.py", "c*.py", "d*.py")):
        mallory.credentials(**{**mallory._credentials, "HTTP_AGENTCHAT_AS": f"mallory.s{n}"})
        r = lock(mallory, path)
        if n == 0:
            assert r.status_code == 201
            continue
        assert (r.status_code, code(r)) == (409, "PATH_LOCK_TOO_MANY_PATTERNS")
        assert r.json()["error"]["detail"]["scope"] == "agent"
    # a nested sub-agent is in the namespace too
    mallory.credentials(**{**mallory._credentials, "HTTP_AGENTCHAT_AS": "mallory.s0.deep"})
    assert code(lock(mallory, "e*.py")) == "PATH_LOCK_TOO_MANY_PATTERNS"
    # the channel keeps room for alice, and a look-alike name is not in the namespace
    assert lock(alice, "*.txt").status_code == 201
    assert lock(api_for("mallory-x"), "*.md").status_code == 201
