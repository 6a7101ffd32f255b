"""The Django admin, driven with Django's test client: lists, expired marking, and the
"recover stale lease" action through the same service."""

from __future__ import annotations

import json

import pytest

from tasks_app.models import Lease, LeaseHistory, Task
from tests.tasks_app.helpers import acted, audits, created, unchanged

pytestmark = pytest.mark.django_db

CHANGELIST = "/admin/tasks_app/lease/"


def admin_messages(response) -> list[str]:
    return [str(message) for message in response.context["messages"]]


@pytest.fixture
def stale(alice, bob, backend, clock):
    """T leased by bob for 60 s, now expired; U leased by bob and active."""
    created(alice, "T")
    created(alice, "U")
    acted(bob, "T", "claim", {"lease_seconds": 60})
    clock.advance(30)
    acted(bob, "U", "claim", {"lease_seconds": 600})
    clock.advance(30)
    return Lease.objects.get(task__task_id="T"), Lease.objects.get(task__task_id="U")


def test_lease_list_marks_expired_leases(admin_client, stale):
    response = admin_client.get(CHANGELIST)
    assert response.status_code == 200
    page = response.content.decode()
    assert page.count("EXPIRED") == 1
    expired = admin_client.get(CHANGELIST + "?state=expired").content.decode()
    assert "T leased by bob" in expired and "U leased by bob" not in expired
    active = admin_client.get(CHANGELIST + "?state=active").content.decode()
    assert "U leased by bob" in active and "T leased by bob" not in active


def test_task_list_filters_and_search(admin_client, stale, alice):
    created(alice, "V", title="needle in a haystack")
    page = admin_client.get("/admin/tasks_app/task/?status__exact=in_progress").content.decode()
    assert ">T<" in page and ">U<" in page and ">V<" not in page
    page = admin_client.get("/admin/tasks_app/task/?q=needle").content.decode()
    assert ">V<" in page and ">T<" not in page
    page = admin_client.get("/admin/tasks_app/task/?owner=bob").content.decode()
    assert ">T<" in page and ">V<" not in page
    assert (
        admin_client.get(
            f"/admin/tasks_app/task/{Task.objects.get(task_id='T').pk}/change/"
        ).status_code
        == 200
    )


def test_recover_action_asks_for_owner_and_reason_first(admin_client, stale):
    lease, _ = stale
    with unchanged():
        response = admin_client.post(
            CHANGELIST, {"action": "recover_stale_lease", "_selected_action": [lease.pk]}
        )
    assert response.status_code == 200
    page = response.content.decode()
    assert "New owner" in page and "Reason" in page and 'name="apply"' in page


def test_recover_action_recovers_an_expired_lease_through_the_service(admin_client, stale):
    lease, _ = stale
    before = len(audits())
    response = admin_client.post(
        CHANGELIST,
        {
            "action": "recover_stale_lease",
            "_selected_action": [lease.pk],
            "apply": "Recover",
            "owner": "carol",
            "reason": "bob's session died",
            "lease_seconds": "120",
        },
        follow=True,
    )
    assert response.status_code == 200
    assert admin_messages(response) == ["backend/T: recovered for carol"]
    lease = Lease.objects.get(task__task_id="T")
    assert (lease.owner, lease.previous_owner, lease.recovery_reason) == (
        "carol",
        "bob",
        "bob's session died",
    )
    assert Task.objects.get(task_id="T").owner == "carol"
    new = audits()[before:]
    assert [(m.sender, m.status, m.title) for m in new] == [
        ("admin", "lease.recovered", "lease.recovered T")
    ]
    payload = json.loads(new[0].body)
    assert (payload["lease_owner"], payload["previous_owner"], payload["recovery_reason"]) == (
        "carol",
        "bob",
        "bob's session died",
    )
    assert LeaseHistory.objects.filter(event="lease.recovered", actor="admin").count() == 1


def test_recover_action_refuses_an_unexpired_lease_and_reports_it(admin_client, stale):
    _, active = stale
    with unchanged():
        response = admin_client.post(
            CHANGELIST,
            {
                "action": "recover_stale_lease",
                "_selected_action": [active.pk],
                "apply": "Recover",
                "owner": "carol",
                "reason": "impatient",
            },
            follow=True,
        )
    assert admin_messages(response) == [
        "backend/U: LEASE_NOT_EXPIRED: lease for task U is still active"
    ]


def test_recover_action_reports_a_bad_owner(admin_client, stale):
    lease, _ = stale
    with unchanged():
        response = admin_client.post(
            CHANGELIST,
            {
                "action": "recover_stale_lease",
                "_selected_action": [lease.pk],
                "apply": "Recover",
                "owner": "Not An Agent",
                "reason": "x",
            },
            follow=True,
        )
    [message] = admin_messages(response)
    assert message.startswith("backend/T: LEASE_INVALID_OWNER: owner must be")


def test_recover_action_with_missing_reason_shows_the_form_again(admin_client, stale):
    lease, _ = stale
    with unchanged():
        response = admin_client.post(
            CHANGELIST,
            {
                "action": "recover_stale_lease",
                "_selected_action": [lease.pk],
                "apply": "Recover",
                "owner": "carol",
                "reason": "",
            },
        )
    assert response.status_code == 200
    assert "This field is required" in response.content.decode()


def test_admin_cannot_edit_or_delete_tasks_leases_or_history(admin_client, stale):
    lease, _ = stale
    assert admin_client.get("/admin/tasks_app/task/add/").status_code == 403
    assert admin_client.get(f"/admin/tasks_app/lease/{lease.pk}/delete/").status_code == 403
    assert admin_client.get("/admin/tasks_app/leasehistory/").status_code == 200
    history = LeaseHistory.objects.first()
    response = admin_client.post(
        f"/admin/tasks_app/leasehistory/{history.pk}/change/", {"owner": "mallory"}
    )
    assert response.status_code == 403
    assert LeaseHistory.objects.get(pk=history.pk).owner == "bob"
