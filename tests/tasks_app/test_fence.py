"""Fencing tokens of task leases (docs/tasks.md, "Fencing tokens"): growth across owners,
renew keeps, recoveries bump, STALE_FENCE before the owner checks, INVALID_FENCE for hostile
values, the check endpoint's three states, members-only. Time moves with ``clock``."""

from __future__ import annotations

import json

import pytest

from channels_app.models import Channel, Message
from tasks_app import services
from tasks_app.models import Lease, Task
from tests.errors import error_code
from tests.tasks_app.helpers import act, acted, created, tasks_url

pytestmark = pytest.mark.django_db


def fence_of(client, task_id, fence):
    return client.get(tasks_url(task_id, "fence"), {"fence": fence})


def last_audit() -> dict:
    return json.loads(Message.objects.filter(kind=Message.Kind.AUDIT).order_by("-seq")[0].body)


@pytest.fixture
def task(alice, backend):
    assert created(alice, "T")["fence"] == 0
    return "T"


def test_claims_and_recoveries_grow_the_fence_across_owners_and_renew_keeps_it(
    alice, bob, carol, task, clock
):
    claimed = acted(bob, task, "claim", {"lease_seconds": 10})
    assert claimed["fence"] == 1
    assert last_audit()["fence"] == 1
    assert acted(bob, task, "renew", {"lease_seconds": 10, "fence": 1})["fence"] == 1
    assert last_audit()["event"] == "lease.renewed" and last_audit()["fence"] == 1
    clock.advance(11)
    recovered = acted(carol, task, "recover", {"reason": "bob paused"})
    assert recovered["fence"] == 2 and recovered["owner"] == "carol"
    assert Lease.objects.get(task__task_id=task).fence == 2
    assert acted(carol, task, "release", {"fence": 2})["fence"] == 2
    assert acted(alice, task, "claim")["fence"] == 3  # another owner: still growing


def test_a_stale_fence_is_refused_before_the_owner_check_even_for_the_owner_in_name(
    bob, carol, task, clock
):
    acted(bob, task, "claim", {"lease_seconds": 10})
    clock.advance(11)
    acted(bob, task, "recover", {"reason": "back from a pause"})  # bob again, fence 2
    before = Message.objects.count()
    for who, action in ((bob, "renew"), (bob, "done"), (bob, "release"), (carol, "done")):
        response = act(who, task, action, {"fence": 1})
        assert response.status_code == 409, response.content
        assert error_code(response) == "STALE_FENCE"
        assert response.json()["error"]["detail"]["current_fence"] == 2
    assert Message.objects.count() == before  # nothing written
    assert acted(bob, task, "done", {"fence": 2})["status"] == "done"


def test_without_a_fence_the_lease_verbs_behave_as_before(bob, carol, task):
    acted(bob, task, "claim")
    assert error_code(act(carol, task, "renew")) == "LEASE_OWNER_MISMATCH"
    assert acted(bob, task, "done")["status"] == "done"


@pytest.mark.parametrize(
    "raw",
    [
        '{"fence": true}',
        '{"fence": 1.0}',
        '{"fence": "1"}',
        '{"fence": "\\u0661"}',
        '{"fence": -1}',
        '{"fence": null}',
        '{"fence": 99999999999999999999999999}',
        '{"fence": 9223372036854775808}',
    ],
)
def test_a_hostile_fence_in_a_body_is_invalid_fence(bob, task, raw):
    acted(bob, task, "claim")
    url = tasks_url(task, "renew")
    response = bob.generic("POST", url, raw.encode(), content_type="application/json")
    assert response.status_code == 400, response.content
    assert error_code(response) == "INVALID_FENCE"


def test_a_lone_surrogate_fence_is_refused(bob, task):
    acted(bob, task, "claim")
    raw = b'{"fence": "\\ud800"}'
    response = bob.generic("POST", tasks_url(task, "done"), raw, content_type="application/json")
    assert response.status_code == 400
    assert error_code(response) in {"INVALID_TEXT", "INVALID_FENCE"}
    # The UTF-8 bytes of a surrogate, percent-encoded, in the query.
    assert bob.get(tasks_url(task, "fence") + "?fence=%ED%A0%80").status_code == 400


@pytest.mark.parametrize("raw", ["", "\u0661", "1.0", "true", "-1", "0x1", " 1", "9" * 30])
def test_a_hostile_fence_in_the_check_query_is_invalid_fence(bob, task, raw):
    response = fence_of(bob, task, raw)
    assert response.status_code == 400
    assert error_code(response) == "INVALID_FENCE"


def test_the_check_answers_current_expired_and_stale(bob, carol, task, clock):
    assert fence_of(bob, task, 0).json()["state"] == "expired"  # never claimed
    acted(bob, task, "claim", {"lease_seconds": 10})
    answer = fence_of(carol, task, 1).json()
    assert answer == {
        "task_id": task,
        "fence": 1,
        "checked": 1,
        "state": "current",
        "owner": "bob",
        "expires_at": answer["expires_at"],
    }
    clock.advance(11)
    assert fence_of(carol, task, 1).json()["state"] == "expired"
    acted(carol, task, "recover", {"reason": "bob paused"})
    assert fence_of(carol, task, 1).json()["state"] == "stale"
    assert fence_of(carol, task, 2).json()["state"] == "current"
    assert fence_of(carol, task, 3).json()["state"] == "stale"  # never handed out
    acted(carol, task, "done")
    assert fence_of(carol, task, 2).json() | {"expires_at": None} == {
        "task_id": task,
        "fence": 2,
        "checked": 2,
        "state": "expired",
        "owner": None,
        "expires_at": None,
    }


def test_the_check_is_members_only(alice, bob, carol, task):
    Channel.objects.filter(name="backend").update(visibility="members", members=["alice", "bob"])
    assert fence_of(bob, task, 0).status_code == 200
    response = fence_of(carol, task, 0)
    assert response.status_code == 404, response.content


def test_an_admin_force_release_bumps_the_fence(bob, task):
    acted(bob, task, "claim")
    channel = Channel.objects.get(name="backend")
    services.lease_force_release(channel=channel, task_id=task, actor="admin", reason="gone")
    assert Task.objects.get(task_id=task).fence == 2
    assert last_audit()["event"] == "lease.force_released" and last_audit()["fence"] == 2
    assert error_code(act(bob, task, "done", {"fence": 1})) == "STALE_FENCE"
