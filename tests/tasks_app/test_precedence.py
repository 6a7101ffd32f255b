"""Which error wins when a request is wrong in several ways: the reference CLI's order, kept
while the values are parsed where the request enters (``tasks_app.api.serializers``) and the
services take them parsed. The shape of a body (unknown fields, then the channel, then the
update's own rules) comes first; a create judges its values before any task; an update and a
lease operation judge theirs only after the task, the caller's right to change it and the
lease state; values are judged in the reference's field order. Nothing is changed by any of
these refusals. (A lease's duration after its state: tests/tasks_app/test_leases.py.)"""

from __future__ import annotations

from typing import Any

import pytest

from tests.errors import error_code
from tests.tasks_app.helpers import (
    act,
    acted,
    create,
    created,
    tasks_url,
    unchanged,
    update,
    updated,
)

pytestmark = pytest.mark.django_db

# Every field of a task wrong, in the reference's order of judging, with the code each gets.
BAD_FIELDS: list[tuple[str, Any, str]] = [
    ("title", "a\nb", "TASK_INVALID_TITLE"),
    ("status", "bogus", "TASK_INVALID_STATUS"),
    ("owner", "no one", "TASK_INVALID_OWNER"),
    ("depends_on", "T", "TASK_INVALID_DEPENDS_ON"),
    ("files_hint", ["/etc/passwd"], "TASK_PATH_OUTSIDE_WORKSPACE"),
    ("acceptance", [" "], "TASK_INVALID_ACCEPTANCE"),
    ("branch", " ", "TASK_INVALID_BRANCH"),
]


def codes_as_each_is_fixed(send: Any, bad: list[tuple[str, Any, str]]) -> list[str]:
    """The code answered for the body with every field of ``bad``, then with the first one
    left out, and so on."""
    return [
        error_code(send({field: value for field, value, _ in bad[i:]})) for i in range(len(bad))
    ]


# --- create --------------------------------------------------------------------------------------


def test_a_create_answers_its_shape_and_channel_before_its_values(alice, backend):
    bad = {"id": "bad id", "title": "a\nb"}
    with unchanged():
        assert error_code(create(alice, "x", channel="nope", ttl=1)) == "TASK_UNKNOWN_FIELD"
        assert error_code(create(alice, "x", channel="nope", created_by="bob")) == (
            "SENDER_MISMATCH"
        )
        assert error_code(alice.post(tasks_url(channel="nope"), bad, format="json")) == (
            "CHANNEL_NOT_FOUND"
        )


def test_a_create_judges_its_values_in_the_reference_order(alice, backend):
    bad = [("id", "bad id", "TASK_INVALID_ID")] + [f for f in BAD_FIELDS if f[0] != "status"]

    def send(body: dict[str, Any]) -> Any:
        return alice.post(tasks_url(), {"id": "T", "title": "t", **body}, format="json")

    with unchanged():
        assert codes_as_each_is_fixed(send, bad) == [code for _, _, code in bad]


def test_a_create_judges_its_values_before_the_tasks_of_the_channel(alice, backend):
    created(alice, "T")
    with unchanged():
        assert error_code(create(alice, "t", title="a\nb")) == "TASK_INVALID_TITLE"
        assert error_code(create(alice, "U", depends_on=["nope"], branch=" ")) == (
            "TASK_INVALID_BRANCH"
        )
        assert error_code(create(alice, "U", depends_on=["U"], acceptance=[1])) == (
            "TASK_INVALID_ACCEPTANCE"
        )
        assert error_code(create(alice, "t")) == "TASK_ALREADY_EXISTS"


# --- update --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "TASK_INVALID_UPDATE"),
        ({"clear_owner": "yes", "owner": None}, "TASK_INVALID_UPDATE"),  # the flags first
        ({"clear_branch": 1, "title": "a\nb"}, "TASK_INVALID_UPDATE"),
        ({"owner": None, "branch": "b", "clear_branch": True}, "TASK_INVALID_OWNER"),
        ({"owner": "bob", "clear_owner": True, "branch": None}, "TASK_INVALID_UPDATE"),
        ({"branch": None, "title": "a\nb"}, "TASK_INVALID_BRANCH"),
    ],
)
def test_an_update_answers_its_shape_before_the_task(alice, backend, body, code):
    created(alice, "T")
    with unchanged():
        assert error_code(alice.patch(tasks_url("T", channel="nope"), body, format="json")) == (
            "CHANNEL_NOT_FOUND"
        )
        assert error_code(update(alice, "nope", **body)) == code
        assert error_code(update(alice, "T", **body)) == code


def test_an_update_answers_the_task_and_its_owner_before_the_values(alice, bob, backend):
    created(alice, "T", owner="carol")
    with unchanged():
        for field, value, _ in BAD_FIELDS:
            assert error_code(update(alice, "nope", **{field: value})) == "TASK_NOT_FOUND"
            assert error_code(update(bob, "T", **{field: value})) == "TASK_NOT_OWNER"


def test_an_update_of_a_leased_task_answers_the_lease_before_the_values(
    alice, bob, carol, backend, clock
):
    created(alice, "T")
    acted(bob, "T", "claim", {"lease_seconds": 100})
    with unchanged():
        for field, value, _ in BAD_FIELDS:
            assert error_code(update(carol, "T", **{field: value})) == "LEASE_OWNER_MISMATCH"
        # A status its parse refuses is a change of status, which only a lease operation makes;
        # an owner, even a wrong one, is the lease's too.
        for field, value in [("status", "bogus"), ("status", 5), ("owner", "no one")]:
            assert error_code(update(bob, "T", **{field: value})) == "LEASE_MUTATION_REQUIRED"
        assert error_code(update(bob, "T", title="a\nb")) == "TASK_INVALID_TITLE"
        clock.advance(100)
        for field, value, _ in BAD_FIELDS:
            assert error_code(update(bob, "T", **{field: value})) == "LEASE_RECOVERY_REQUIRED"


def test_an_update_judges_its_values_in_the_reference_order(alice, backend):
    created(alice, "T")

    def send(body: dict[str, Any]) -> Any:
        return update(alice, "T", **body)

    with unchanged():
        assert codes_as_each_is_fixed(send, BAD_FIELDS) == [code for _, _, code in BAD_FIELDS]


def test_an_update_judges_its_values_before_transition_and_graph(alice, backend):
    created(alice, "C")
    updated(alice, "C", status="cancelled")
    created(alice, "T")
    with unchanged():
        assert error_code(update(alice, "C", status="open", title="a\nb")) == "TASK_INVALID_TITLE"
        assert error_code(update(alice, "T", depends_on=["nope"], branch=" ")) == (
            "TASK_INVALID_BRANCH"
        )
        assert error_code(update(alice, "T", depends_on=["T"], files_hint=[5])) == (
            "TASK_PATH_OUTSIDE_WORKSPACE"
        )
        assert error_code(update(alice, "C", status="open")) == "TASK_INVALID_TRANSITION"


# --- leases --------------------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["claim", "renew", "recover"])
def test_a_lease_operation_answers_the_channel_and_the_task_before_the_duration(
    alice, bob, backend, action
):
    created(alice, "T")
    body = {"lease_seconds": 0, **({"reason": "r"} if action == "recover" else {})}
    with unchanged():
        assert error_code(
            bob.post(tasks_url("T", action, channel="nope"), body, format="json")
        ) == ("CHANNEL_NOT_FOUND")
        assert error_code(act(bob, "nope", action, body)) == "TASK_NOT_FOUND"
        if action != "claim":
            assert error_code(act(bob, "T", action, body)) == "LEASE_NOT_FOUND"


def test_a_recovery_answers_the_channel_before_its_reason(bob, backend):
    with unchanged():
        assert error_code(
            bob.post(tasks_url("T", "recover", channel="nope"), {}, format="json")
        ) == ("CHANNEL_NOT_FOUND")


def test_the_default_duration_is_judged_as_a_given_one_after_the_state(
    alice, bob, carol, backend, settings
):
    # A maximum set below the default (300 s) refuses a claim that names no duration.
    created(alice, "T")
    created(alice, "U")
    acted(bob, "U", "claim", {"lease_seconds": 10})
    settings.AGENTCHAT_MAX_LEASE_SECONDS = 60
    with unchanged():
        assert error_code(act(carol, "U", "claim")) == "LEASE_CONFLICT"
        response = act(bob, "T", "claim")
        assert error_code(response) == "LEASE_INVALID_DURATION"
        assert response.json()["error"]["message"] == "lease_seconds must be at most 60 seconds"
