"""The statuses of the server's own audit messages (``agentchat.core.rules.audit.AUDIT_STATUSES``,
the one list ``audit_post`` holds every audit to) are refused on a client's message, through the
API, the dashboard and the service, with STATUS_RESERVED; the audit path still takes them."""

from __future__ import annotations

import pytest
from django.test import Client

from agentchat.core.rules.audit import AUDIT_STATUSES
from agentchat.core.rules.errors import AppError
from channels_app import services
from channels_app.models import Channel, Message

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(api_for):
    client = api_for("alice")
    assert client.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    return client


@pytest.mark.parametrize("status", AUDIT_STATUSES)
def test_an_audit_status_is_refused_on_a_post(alice, status):
    before = Message.objects.count()
    for spelled in (status, status.upper(), f" {status} "):
        r = alice.post(
            "/api/v1/channels/ops/messages/", {"title": "t", "status": spelled}, format="json"
        )
        assert r.status_code == 400, r.content
        assert r.json()["error"]["code"] == "STATUS_RESERVED"
        assert r.json()["error"]["detail"]["field"] == "status"
    with pytest.raises(AppError) as info:
        services.message_post(
            channel=Channel.objects.get(), sender="alice", title="t", status=status
        )
    assert info.value.code == "STATUS_RESERVED"
    assert Message.objects.count() == before
    audit = services.audit_post(
        channel=Channel.objects.get(), actor="alice", event=status, subject="x", payload={}
    )
    assert (audit.status, audit.kind) == (status, Message.Kind.AUDIT)


@pytest.mark.parametrize("status", AUDIT_STATUSES)
def test_the_dashboard_refuses_it_too(alice, django_user_model, status):
    browser = Client(enforce_csrf_checks=True)
    browser.force_login(django_user_model.objects.create_user("ann", password="pw"))
    token = browser.get("/").cookies["csrftoken"].value
    r = browser.post("/c/ops/post/", {"title": "t", "status": status, "csrfmiddlewaretoken": token})
    assert (
        r.status_code == 400
        and "reserved for the server&#x27;s audit messages" in r.content.decode()
    )
    assert Message.objects.count() == 0


def test_a_status_near_one_is_a_status(alice):
    for status in ("task.created.note", "tasks.created", "lease", "approved"):
        r = alice.post(
            "/api/v1/channels/ops/messages/", {"title": "t", "status": status}, format="json"
        )
        assert r.status_code == 201, (status, r.content)


def test_an_audit_of_a_status_not_on_the_list_is_a_programming_error(alice):
    with pytest.raises(ValueError, match="AUDIT_STATUSES"):
        services.audit_post(
            channel=Channel.objects.get(), actor="alice", event="task.frobbed", subject=None,
            payload={},
        )  # fmt: skip
