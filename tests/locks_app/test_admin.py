"""Django admin: active and expired locks; "recover stale lock" through the service."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from channels_app.models import Message
from locks_app.models import PathLock

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:locks_app_pathlock_changelist")


@pytest.fixture
def locks(api_for, clock):
    alice = api_for("alice")
    api_for("bob")
    alice.post("/api/v1/channels/", {"name": "review"}, format="json")
    stale = alice.post(
        "/api/v1/channels/review/locks/",
        {"paths": ["src/a.py"], "lease_seconds": 10},
        format="json",
    ).json()
    clock.advance(20)
    active = alice.post(
        "/api/v1/channels/review/locks/", {"paths": ["docs/"]}, format="json"
    ).json()
    return {"stale": stale, "active": active}


def pk_of(lock_id: str) -> int:
    return PathLock.objects.get(lock_id=lock_id).pk


def test_changelist_shows_owner_paths_expiry_and_state(admin_client, locks):
    r = admin_client.get(CHANGELIST)
    assert r.status_code == 200
    html = r.content.decode()
    assert locks["stale"]["lock_id"] in html
    assert "src/a.py" in html
    assert "docs" in html
    assert html.count("EXPIRED</strong>") == 1  # the stale lock is marked, the active one not
    html = admin_client.get(CHANGELIST + "?state=expired").content.decode()
    assert locks["stale"]["lock_id"] in html
    assert locks["active"]["lock_id"] not in html
    html = admin_client.get(CHANGELIST + "?state=active").content.decode()
    assert locks["active"]["lock_id"] in html
    assert locks["stale"]["lock_id"] not in html
    detail = reverse("admin:locks_app_pathlock_change", args=[pk_of(locks["stale"]["lock_id"])])
    assert admin_client.get(detail).status_code == 200


def test_recover_action_asks_for_owner_and_reason_first(admin_client, locks):
    pk = pk_of(locks["stale"]["lock_id"])
    r = admin_client.post(CHANGELIST, {"action": "recover_stale_lock", "_selected_action": [pk]})
    assert r.status_code == 200
    html = r.content.decode()
    assert 'name="owner"' in html
    assert 'name="reason"' in html
    assert PathLock.objects.get(pk=pk).owner == "alice"


def test_recover_action_recovers_through_the_service(admin_client, locks):
    pk = pk_of(locks["stale"]["lock_id"])
    r = admin_client.post(
        CHANGELIST,
        {
            "action": "recover_stale_lock",
            "_selected_action": [pk],
            "apply": "1",
            "owner": "bob",
            "reason": "alice is gone",
            "lease_seconds": "600",
        },
        follow=True,
    )
    assert r.status_code == 200
    assert "Recovered 1 lock(s)." in r.content.decode()
    lock = PathLock.objects.get(pk=pk)
    assert (lock.owner, lock.previous_owner, lock.recovery_reason) == (
        "bob",
        "alice",
        "alice is gone",
    )
    audit = Message.objects.filter(kind=Message.Kind.AUDIT).order_by("-seq").first()
    assert audit.status == "path.lock.recovered"
    assert json.loads(audit.body)["recovery_reason"] == "alice is gone"


@pytest.mark.parametrize(
    ("which", "owner", "reason", "expected"),
    [
        ("active", "bob", "too early", "PATH_LOCK_NOT_STALE"),
        ("stale", "Not A Name", "x", "PATH_LOCK_INVALID_OWNER"),
        ("stale", "bob", "   ", "PATH_LOCK_INVALID_REASON"),
    ],
)
def test_recover_action_reports_service_errors(admin_client, locks, which, owner, reason, expected):
    pk = pk_of(locks[which]["lock_id"])
    before = list(PathLock.objects.values_list("owner", "expires_at"))
    audits = Message.objects.count()
    r = admin_client.post(
        CHANGELIST,
        {
            "action": "recover_stale_lock",
            "_selected_action": [pk],
            "apply": "1",
            "owner": owner,
            "reason": reason,
            "lease_seconds": "300",
        },
        follow=True,
    )
    assert expected in r.content.decode()
    assert list(PathLock.objects.values_list("owner", "expires_at")) == before
    assert Message.objects.count() == audits


def test_admin_cannot_edit_or_delete_locks(admin_client, locks):
    pk = pk_of(locks["stale"]["lock_id"])
    delete = reverse("admin:locks_app_pathlock_delete", args=[pk])
    assert admin_client.post(delete, {"post": "yes"}).status_code == 403
    assert PathLock.objects.filter(pk=pk).exists()
