"""The status machine (CLI document): every pair, through the generic update and through the
block / done / release commands on unleased tasks."""

from __future__ import annotations

import itertools

import pytest

from tests.tasks_app.helpers import (
    act,
    audit_payloads,
    audits,
    created,
    error,
    show,
    unchanged,
    update,
    updated,
)

pytestmark = pytest.mark.django_db

STATUSES = ["open", "in_progress", "blocked", "done", "cancelled"]
# The document's list; same-state writes are idempotent.
ALLOWED = {
    ("open", "in_progress"),
    ("open", "blocked"),
    ("open", "cancelled"),
    ("in_progress", "open"),
    ("in_progress", "blocked"),
    ("in_progress", "done"),
    ("in_progress", "cancelled"),
    ("blocked", "open"),
    ("blocked", "in_progress"),
    ("blocked", "cancelled"),
} | {(status, status) for status in STATUSES}
# How to reach each status from open.
PATH = {
    "open": [],
    "in_progress": ["in_progress"],
    "blocked": ["blocked"],
    "done": ["in_progress", "done"],
    "cancelled": ["cancelled"],
}


def put_in(client, task_id: str, status: str) -> None:
    created(client, task_id)
    for step in PATH[status]:
        updated(client, task_id, status=step)
    assert show(client, task_id)["status"] == status


@pytest.mark.parametrize(("old", "new"), list(itertools.product(STATUSES, STATUSES)))
def test_every_status_pair_through_update(alice, backend, old, new):
    put_in(alice, "T", old)
    if (old, new) in ALLOWED:
        before = len(audits())
        body = updated(alice, "T", status=new)
        assert body["status"] == new
        assert len(audits()) == before + 1
        assert audit_payloads()[-1]["previous_status"] == old
        assert audit_payloads()[-1]["status"] == new
    else:
        with unchanged():
            err = error(update(alice, "T", status=new), 409, "TASK_INVALID_TRANSITION")
        assert err["message"] == f"transition {old!r} -> {new!r} is not allowed"
        assert err["detail"] == {"task_id": "T", "old_status": old, "new_status": new}


# done/block/release on tasks without a lease: block -> blocked, done -> done, release -> open.
COMMANDS = {"block": "blocked", "done": "done", "release": "open"}


@pytest.mark.parametrize(("old", "command"), list(itertools.product(STATUSES, sorted(COMMANDS))))
def test_every_status_through_block_done_release_without_a_lease(alice, backend, old, command):
    put_in(alice, "T", old)
    new = COMMANDS[command]
    if (old, new) in ALLOWED:
        before = len(audits())
        body = act(alice, "T", command).json()
        assert body["status"] == new
        assert len(audits()) == before + 1
        payload = audit_payloads()[-1]
        assert payload["event"] == "task.updated"
        assert payload["previous_status"] == old
    else:
        with unchanged():
            error(act(alice, "T", command), 409, "TASK_INVALID_TRANSITION")
