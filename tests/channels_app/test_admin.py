"""The admin's real views (Django's test client as a signed-in superuser): messages — the audit
history of tasks and locks included — cursors and marker claims are for looking only, and
channels are never deleted (that would cascade to their messages)."""

from __future__ import annotations

import pytest
from django.contrib.admin.utils import quote

from channels_app.models import Channel, Cursor, MarkerClaim, Message
from channels_app.services import audit_post, channel_create, marker_claim, message_post

pytestmark = pytest.mark.django_db


@pytest.fixture
def history(make_agent):
    bob, _ = make_agent("bob")
    channel = channel_create(name="review", created_by="alice")
    message, _ = message_post(channel=channel, sender="alice", title="Schema v0.2", body="hi")
    audit = audit_post(
        channel=channel, actor="alice", event="task.created", subject="T-1", payload={"id": "T-1"}
    )
    cursor = Cursor.objects.create(agent=bob, channel=channel, seq=2)
    claim = marker_claim(channel=channel, marker="task-12.md", owner="alice")
    return {
        "channel": channel,
        "message": message,
        "audit": audit,
        "cursor": cursor,
        "claim": claim,
    }


def everything() -> list:
    return [
        list(Channel.objects.values().order_by("pk")),
        list(Message.objects.values().order_by("pk")),
        list(Cursor.objects.values().order_by("pk")),
        list(MarkerClaim.objects.values().order_by("pk")),
    ]


def test_messages_and_audit_messages_cannot_be_deleted(admin_client, history):
    before = everything()
    for message in (history["message"], history["audit"]):
        url = f"/admin/channels_app/message/{message.pk}/delete/"
        assert admin_client.get(url).status_code == 403
        assert admin_client.post(url, {"post": "yes"}).status_code == 403
    # Not offered as a bulk action, and refused when posted anyway.
    changelist = admin_client.get("/admin/channels_app/message/")
    assert changelist.status_code == 200
    assert "delete_selected" not in changelist.content.decode()
    response = admin_client.post(
        "/admin/channels_app/message/",
        {
            "action": "delete_selected",
            "_selected_action": [history["message"].pk, history["audit"].pk],
            "post": "yes",
        },
    )
    assert response.status_code in (200, 302)
    assert everything() == before


def test_messages_cannot_be_edited_or_added(admin_client, history):
    before = everything()
    # The admin quotes a primary key in its URLs (msg_1a... has an "_" it escapes as _5F).
    url = f"/admin/channels_app/message/{quote(history['audit'].pk)}/change/"
    page = admin_client.get(url)
    assert page.status_code == 200  # shown read-only
    assert 'name="_save"' not in page.content.decode()
    response = admin_client.post(url, {"title": "rewritten", "body": "{}", "seq": 2})
    assert response.status_code == 403
    assert admin_client.get("/admin/channels_app/message/add/").status_code == 403
    assert everything() == before


def test_a_channel_cannot_be_deleted_with_or_without_its_history(admin_client, history):
    before = everything()
    url = f"/admin/channels_app/channel/{history['channel'].pk}/delete/"
    assert admin_client.get(url).status_code == 403
    assert admin_client.post(url, {"post": "yes"}).status_code == 403
    changelist = admin_client.get("/admin/channels_app/channel/")
    assert "delete_selected" not in changelist.content.decode()
    admin_client.post(
        "/admin/channels_app/channel/",
        {"action": "delete_selected", "_selected_action": [history["channel"].pk], "post": "yes"},
    )
    empty = channel_create(name="empty", created_by="alice")
    assert admin_client.get(f"/admin/channels_app/channel/{empty.pk}/delete/").status_code == 403
    assert everything()[1:] == before[1:]
    assert Channel.objects.filter(pk=history["channel"].pk).exists()


@pytest.mark.parametrize("model", ["cursor", "markerclaim"])
def test_cursors_and_marker_claims_are_read_only(admin_client, history, model):
    before = everything()
    pk = history["cursor" if model == "cursor" else "claim"].pk
    assert admin_client.get(f"/admin/channels_app/{model}/{pk}/delete/").status_code == 403
    assert admin_client.post(f"/admin/channels_app/{model}/{pk}/change/", {}).status_code == 403
    assert admin_client.get(f"/admin/channels_app/{model}/add/").status_code == 403
    assert everything() == before
