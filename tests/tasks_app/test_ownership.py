"""An owned task without a lease: only its owner, its creator or the channel's maintainer change
it (the reference lets anyone); everyone else gets 403 TASK_NOT_OWNER and nothing changes.
Every mutation of a task is listed here, with what another agent gets."""

from __future__ import annotations

from typing import Any

import pytest

from channels_app.models import Channel
from tests.tasks_app.helpers import CHANNEL, act, created, error, show, unchanged, update, updated

pytestmark = pytest.mark.django_db


@pytest.fixture
def owned(alice, bob, backend) -> dict[str, Any]:
    """T: created by alice, owned by bob, in progress without a lease, depending on D (done),
    so that every transition out of in_progress is allowed by the status machine."""
    created(alice, "D")
    updated(alice, "D", status="in_progress")
    updated(alice, "D", status="done")
    created(alice, "T", owner="bob", depends_on=["D"])
    return updated(bob, "T", status="in_progress")


# (how, request): every way of changing a task through the API.
UPDATES = [
    ("rename", {"title": "renamed"}),
    ("cancel", {"status": "cancelled"}),
    ("complete by status", {"status": "done"}),
    ("reopen", {"status": "open"}),
    ("block by status", {"status": "blocked"}),
    ("take over", {"owner": "carol"}),
    ("assign to a third", {"owner": "dave"}),
    ("clear the owner", {"clear_owner": True}),
    ("change dependencies", {"depends_on": []}),
    ("change files_hint", {"files_hint": ["src/x.py"]}),
    ("change acceptance", {"acceptance": ["it works"]}),
    ("change branch", {"branch": "feat/x"}),
    ("clear branch", {"clear_branch": True}),
    ("same-state write", {"status": "in_progress"}),
]
ACTIONS = ["block", "done", "release"]


@pytest.mark.parametrize(("how", "body"), UPDATES, ids=[how for how, _ in UPDATES])
def test_another_agent_cannot_update_an_owned_task(carol, owned, how, body):
    with unchanged():
        err = error(update(carol, "T", **body), 403, "TASK_NOT_OWNER")
    assert err["detail"] == {
        "task_id": "T",
        "owner": "bob",
        "actor": "carol",
        "allowed": ["bob", "alice"],
    }
    assert err["message"] == (
        "task T is owned by bob: only its owner, its creator or the channel's maintainer may "
        "change it"
    )


@pytest.mark.parametrize("action", ACTIONS)
def test_another_agent_cannot_block_complete_or_release_an_owned_task(carol, owned, action):
    with unchanged():
        error(act(carol, "T", action), 403, "TASK_NOT_OWNER")


@pytest.mark.parametrize(
    ("action", "body", "status", "code"),
    [
        # claim makes the claimer the owner: an assigned task is its owner's (the reference's)
        ("claim", None, 409, "LEASE_CONFLICT"),
        ("renew", None, 404, "LEASE_NOT_FOUND"),
        ("recover", {"reason": "gone"}, 404, "LEASE_NOT_FOUND"),
    ],
)
def test_lease_actions_of_another_agent_on_an_owned_unleased_task_change_nothing(
    carol, owned, action, body, status, code
):
    with unchanged():
        error(act(carol, "T", action, body), status, code)


@pytest.mark.parametrize("who", ["bob", "alice", "mia"])
def test_the_owner_the_creator_and_the_maintainer_may_change_it(api_for, owned, who):
    Channel.objects.filter(name=CHANNEL).update(maintainer="mia")
    client = api_for(who)
    assert updated(client, "T", title=f"by {who}")["title"] == f"by {who}"
    assert act(client, "T", "block").status_code == 200
    assert updated(client, "T", owner="carol")["owner"] == "carol"


def test_the_maintainer_is_the_channels_only(api_for, owned):
    # mia maintains nothing here: she is no decider of T.
    with unchanged():
        error(update(api_for("mia"), "T", title="x"), 403, "TASK_NOT_OWNER")


@pytest.mark.parametrize("action", ACTIONS)
def test_the_owner_completes_blocks_or_releases_its_unleased_task(bob, owned, action):
    status = {"block": "blocked", "done": "done", "release": "open"}[action]
    assert act(bob, "T", action).json()["status"] == status


def test_the_creator_may_cancel_and_clear_an_owned_task(alice, owned):
    assert updated(alice, "T", clear_owner=True)["owner"] is None
    assert updated(alice, "T", status="cancelled")["status"] == "cancelled"


def test_a_task_without_owner_stays_everyones(alice, carol, backend):
    created(alice, "U")
    assert updated(carol, "U", title="carol's words")["title"] == "carol's words"
    # assigning an unowned task is open to anyone; then the rule holds
    assert updated(carol, "U", owner="carol")["owner"] == "carol"
    assert updated(alice, "U", title="the creator still may")["title"] == "the creator still may"


def test_once_handed_over_the_previous_owner_is_no_decider(alice, bob, carol, owned):
    updated(bob, "T", owner="carol")
    with unchanged():
        error(update(bob, "T", title="mine again"), 403, "TASK_NOT_OWNER")
    assert show(alice, "T")["owner"] == "carol"


def test_a_leased_task_keeps_the_lease_rules(alice, bob, carol, backend):
    created(alice, "L")
    act(bob, "L", "claim")
    # the creator is no exception while the lease holds: the lease's owner acts
    with unchanged():
        error(update(alice, "L", title="x"), 403, "LEASE_OWNER_MISMATCH")
        error(update(carol, "L", title="x"), 403, "LEASE_OWNER_MISMATCH")
