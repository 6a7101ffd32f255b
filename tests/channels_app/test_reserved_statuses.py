"""The statuses of the server's own audit messages (``agentchat.core.rules.audit.AUDIT_STATUSES``,
the one list ``audit_post`` holds every audit to) are refused on a client's message, through the
API, the dashboard and the service, with STATUS_RESERVED; the audit path still takes them."""

from __future__ import annotations

import pytest

from agentchat.core.rules.audit import AUDIT_STATUSES, RESERVED_PREFIXES, is_reserved
from agentchat.core.rules.errors import AppError
from channels_app import services
from channels_app.models import Channel, Message
from tests.conftest import PagesClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(api_for):
    client = api_for("alice")
    assert client.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    return client


def post(client, status: str):
    return client.post(
        "/api/v1/channels/ops/messages/", {"title": "t", "status": status}, format="json"
    )


def refused(client, status: str, code: str = "STATUS_RESERVED"):
    """A post of ``status`` through the API is refused with ``code`` (400)."""
    r = post(client, status)
    assert r.status_code == 400, (status, r.content)
    assert r.json()["error"]["code"] == code
    return r


def refused_by_the_service(status: str) -> None:
    with pytest.raises(AppError) as info:
        services.message_post(
            channel=Channel.objects.get(), sender="alice", title="t", status=status
        )
    assert info.value.code == "STATUS_RESERVED"


@pytest.mark.parametrize("status", AUDIT_STATUSES)
def test_an_audit_status_is_refused_on_a_post(alice, status):
    before = Message.objects.count()
    for spelled in (status, status.upper(), f" {status} "):
        assert refused(alice, spelled).json()["error"]["detail"]["field"] == "status"
    refused_by_the_service(status)
    assert Message.objects.count() == before
    audit = services.audit_post(
        channel=Channel.objects.get(), actor="alice", event=status, subject="x", payload={}
    )
    assert (audit.status, audit.kind) == (status, Message.Kind.AUDIT)


@pytest.mark.parametrize("status", AUDIT_STATUSES)
def test_the_dashboard_refuses_it_too(alice, django_user_model, status):
    browser = PagesClient(enforce_csrf_checks=True)
    browser.force_login(django_user_model.objects.create_user("ann", password="pw"))
    token = browser.get("/").cookies["csrftoken"].value
    r = browser.post("/c/ops/post/", {"title": "t", "status": status, "csrfmiddlewaretoken": token})
    assert (
        r.status_code == 400
        and "reserved for the server&#x27;s audit messages" in r.content.decode()
    )
    assert Message.objects.count() == 0


# A family's other members, and look-alikes that compatibility normalization (NFKC) and case
# folding bring back to a reserved status.
RESERVED_LOOKALIKES = [
    "lease.expired",
    "lease.",
    "path.lock.foo",
    "path.lock.",
    "task.created.note",
    "state.anything",
    "channel.deleted",
    "\uff54ask.created",  # full-width t
    "channel\uff0eupdated",  # full-width full stop
    "\uff34\uff21\uff33\uff2b.UPDATED",
    "LEASE.Claimed",
]


@pytest.mark.parametrize("status", RESERVED_LOOKALIKES)
def test_a_family_member_or_a_look_alike_is_reserved(alice, status):
    refused(alice, status)
    assert Message.objects.count() == 0


def test_the_families_are_derived_from_the_one_list():
    assert RESERVED_PREFIXES == (
        "channel.",
        "lease.",
        "loop.",
        "path.lock.",
        "state.",
        "task.",
        "whiteboard.",
    )
    assert all(is_reserved(status) for status in AUDIT_STATUSES)


@pytest.mark.parametrize("status", ["EVENT.capability", "Event.status", "\uff45vent.status"])
def test_an_event_status_in_any_spelling_is_refused_on_a_post(alice, status):
    refused(alice, status, code="INVALID_VALUE")
    assert Message.objects.count() == 0


def test_a_status_near_one_is_a_status(alice):
    for status in ("tasks.created", "lease", "approved", "path.foo", "path.lockx", "events.x"):
        r = post(alice, status)
        assert r.status_code == 201, (status, r.content)


def test_an_audit_of_a_status_not_on_the_list_is_a_programming_error(alice):
    with pytest.raises(ValueError, match="AUDIT_STATUSES"):
        services.audit_post(
            channel=Channel.objects.get(), actor="alice", event="task.frobbed", subject=None,
            payload={},
        )  # fmt: skip


# HTTP v1's kinds: only an envelope's message takes them (issue 17).
@pytest.mark.parametrize(
    "status",
    ["receipt", "contact.share", "contact.upsert", "Contact.Shared", "\uff52eceipt", " receipt "],
)
def test_a_v1_kind_is_refused_on_a_post(alice, status):
    from agentchat.core.rules.audit import is_envelope_status

    assert is_envelope_status(status)
    assert refused(alice, status).json()["error"]["detail"]["field"] == "status"
    refused_by_the_service(status)
    assert Message.objects.count() == 0


@pytest.mark.parametrize("status", ["receipts", "contact", "message", "received", "contacts.share"])
def test_neighbours_of_the_v1_kinds_are_ordinary(alice, status):
    r = post(alice, status)
    assert r.status_code == 201, r.content
