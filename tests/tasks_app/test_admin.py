"""The Django admin, driven with Django's test client: lists, expired marking, and the
"recover stale lease" action through the same service."""

from __future__ import annotations

import json

import pytest
from django.contrib.auth.models import Permission

from agentchat.core.models import Agent
from tasks_app import selectors
from tasks_app.models import Lease, LeaseHistory, Task
from tests.admin_actions import post_action, seen_of
from tests.tasks_app.helpers import acted, audits, created, show, unchanged

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
        response = post_action(
            admin_client,
            CHANGELIST,
            {"action": "recover_stale_lease", "_selected_action": [lease.pk]},
        )
    assert response.status_code == 200
    page = response.content.decode()
    assert "New owner" in page and "Reason" in page and 'name="apply"' in page


def test_recover_action_recovers_an_expired_lease_through_the_service(admin_client, stale, carol):
    lease, _ = stale
    before = len(audits())
    response = post_action(
        admin_client,
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
    assert (
        payload["lease_owner"],
        payload["owner"],
        payload["previous_owner"],
        payload["recovery_reason"],
        payload["actor"],
    ) == ("carol", "carol", "bob", "bob's session died", "admin")
    assert LeaseHistory.objects.filter(event="lease.recovered", actor="admin").count() == 1


def test_recover_action_refuses_an_unexpired_lease_and_reports_it(admin_client, stale, carol):
    _, active = stale
    with unchanged():
        response = post_action(
            admin_client,
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
        response = post_action(
            admin_client,
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
    # A form error: the owner must be an agent (the service checks only the name's shape).
    assert admin_messages(response) == []
    assert "no agent named &#x27;Not An Agent&#x27;" in response.content.decode()


def test_recover_action_with_missing_reason_shows_the_form_again(admin_client, stale):
    lease, _ = stale
    with unchanged():
        response = post_action(
            admin_client,
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


def recover(admin_client, leases, **fields):
    return post_action(
        admin_client,
        CHANGELIST,
        {
            "action": "recover_stale_lease",
            "_selected_action": [lease.pk for lease in leases],
            "apply": "Recover",
            "owner": "carol",
            **fields,
        },
        follow=True,
    )


@pytest.mark.parametrize("reason", [" ", "a\nb", "a\x1bb"])
def test_recover_action_refuses_a_bad_reason_and_changes_nothing(
    admin_client, stale, carol, reason
):
    with unchanged():
        response = recover(admin_client, stale, reason=reason)
    assert [message.split(": ")[:2] for message in admin_messages(response)] == [
        ["backend/T", "LEASE_INVALID_REASON"],
        ["backend/U", "LEASE_INVALID_REASON"],
    ]


@pytest.mark.parametrize("seconds", ["0", "-5", "1e12"])
def test_recover_action_refuses_a_bad_duration_after_the_lease_state(
    admin_client, stale, carol, seconds
):
    # The expired lease is refused for its duration, the active one for being active.
    with unchanged():
        response = recover(admin_client, stale, reason="gone", lease_seconds=seconds)
    assert [message.split(": ")[:2] for message in admin_messages(response)] == [
        ["backend/T", "LEASE_INVALID_DURATION"],
        ["backend/U", "LEASE_NOT_EXPIRED"],
    ]


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


# --- force release (break-glass) -------------------------------------------------------------


def force_release(admin_client, lease, reason="bob's laptop died"):
    data = {"action": "force_release_lease", "_selected_action": [lease.pk], "apply": "Force"}
    if reason is not None:
        data["reason"] = reason
    return post_action(admin_client, CHANGELIST, data, follow=True)


def test_force_release_asks_for_a_reason_first(admin_client, stale):
    _, active = stale
    with unchanged():
        response = post_action(
            admin_client,
            CHANGELIST,
            {"action": "force_release_lease", "_selected_action": [active.pk]},
        )
    assert response.status_code == 200
    page = response.content.decode()
    assert "Reason" in page and 'name="apply"' in page and "Break-glass" in page
    assert 'value="force_release_lease"' in page


@pytest.mark.parametrize("which", ["active", "expired"])
def test_force_release_ends_the_lease_and_reopens_the_task(admin_client, stale, carol, which):
    expired, active = stale
    lease = active if which == "active" else expired
    task_id = lease.task.task_id
    claim_record = selectors.lease_record(lease)
    before = len(audits())
    response = force_release(admin_client, lease)
    assert admin_messages(response) == [f"backend/{task_id}: lease of bob released"]
    assert not Lease.objects.filter(pk=lease.pk).exists()
    task = show(carol, task_id)
    assert (task["status"], task["owner"], task["lease_expires_at"], task["lease"]) == (
        "open",
        None,
        None,
        None,
    )
    [message] = audits()[before:]
    assert (message.sender, message.status, message.title, message.to) == (
        "admin",
        "lease.force_released",
        f"lease.force_released {task_id}",
        [],
    )
    payload = json.loads(message.body)
    assert message.body == json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)
    assert len(payload.pop("transaction_id")) == 32
    assert payload == {
        "actor": "admin",
        "changed_fields": ["lease_expires_at", "owner", "status", "updated_at"],
        "channel": "backend",
        "event": "lease.force_released",
        "fence": 2,
        "lease": claim_record,
        "lease_expires_at": None,
        "lease_owner": "bob",
        "owner": None,
        "previous_lease_expires_at": claim_record["lease_expires_at"],
        "previous_status": "in_progress",
        "reason": "bob's laptop died",
        "status": "open",
        "task_id": task_id,
        "updated_at": task["updated_at"],
    }
    history = LeaseHistory.objects.filter(task__task_id=task_id).order_by("pk").last()
    assert (history.event, history.actor, history.owner, history.recovery_reason) == (
        "lease.force_released",
        "admin",
        "bob",
        "bob's laptop died",
    )
    # An ordinary open task again: anyone may claim it.
    assert acted(carol, task_id, "claim")["owner"] == "carol"


def test_force_release_is_sent_by_the_admins_agent_when_linked(admin_client, admin_user, stale):
    Agent.objects.create(name="ops-admin", user=admin_user)
    _, active = stale
    force_release(admin_client, active)
    assert (audits()[-1].sender, json.loads(audits()[-1].body)["actor"]) == (
        "ops-admin",
        "ops-admin",
    )


@pytest.mark.parametrize("reason", [" ", "a\nb"])
def test_force_release_refuses_a_bad_reason_and_changes_nothing(admin_client, stale, reason):
    _, active = stale
    with unchanged():
        response = force_release(admin_client, active, reason=reason)
    [message] = admin_messages(response)
    assert message.startswith("backend/U: LEASE_INVALID_REASON: ")


def test_force_release_without_a_reason_shows_the_form_again(admin_client, stale):
    _, active = stale
    with unchanged():
        response = force_release(admin_client, active, reason=None)
    assert response.status_code == 200
    assert "This field is required" in response.content.decode()


def test_force_release_needs_the_change_lease_permission(client, django_user_model, stale):
    _, active = stale
    user = django_user_model.objects.create_user("viewer", password="pw", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_lease"))
    client.force_login(user)
    with unchanged():
        response = client.post(
            CHANGELIST,
            {
                "action": "force_release_lease",
                "_selected_action": [active.pk],
                "apply": "Force",
                "reason": "r",
            },
            follow=True,
        )
    assert response.status_code == 200
    assert Lease.objects.filter(pk=active.pk).exists()


def test_recovery_acts_only_on_the_lease_as_the_admin_saw_it(admin_client, stale, carol, clock):
    # Issue 9 review: the action recovered whoever held the lease at POST time. Here bob's
    # expired lease is recovered by carol between the page and the POST.
    lease, _ = stale
    data = {"action": "recover_stale_lease", "_selected_action": [lease.pk]}
    page = admin_client.post(CHANGELIST, data)
    acted(carol, "T", "recover", {"reason": "mine now"})
    apply = {**data, "apply": "Recover", "owner": "alice", "reason": "x"}
    with unchanged():
        response = admin_client.post(CHANGELIST, {**seen_of(page), **apply}, follow=True)
    [message] = admin_messages(response)
    assert message.startswith("backend/T: TASK_CONFLICT: the lease of task T changed since")
    assert "now held by carol" in message


def test_force_release_acts_only_on_the_lease_as_the_admin_saw_it(admin_client, stale, bob):
    _, active = stale
    data = {"action": "force_release_lease", "_selected_action": [active.pk]}
    page = admin_client.post(CHANGELIST, data)
    acted(bob, "U", "renew", {"lease_seconds": 900})
    apply = {**data, "apply": "Force", "reason": "x"}
    with unchanged():
        response = admin_client.post(CHANGELIST, {**seen_of(page), **apply}, follow=True)
    [message] = admin_messages(response)
    assert "TASK_CONFLICT" in message and "changed since it was shown" in message
    with unchanged():
        response = admin_client.post(CHANGELIST, apply, follow=True)
    assert admin_messages(response) == ["backend/U: not shown on the page; look again"]


def test_recovery_for_a_non_member_of_a_members_only_channel_is_a_form_error(
    admin_client, stale, carol
):
    from channels_app.models import Channel

    Channel.objects.filter(name="backend").update(visibility="members", members=["alice", "bob"])
    lease, _ = stale
    data = {"action": "recover_stale_lease", "_selected_action": [lease.pk]}
    apply = {**data, "apply": "Recover", "owner": "carol", "reason": "x"}
    with unchanged():
        response = post_action(admin_client, CHANGELIST, apply, follow=True)
    assert admin_messages(response) == []
    assert "carol is not a member of the members-only channel(s) backend" in (
        response.content.decode()
    )
