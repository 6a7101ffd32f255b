"""Provenance: every message says whether a person or an agent sent it, from the
sender's identity on the server, never from the request."""

from __future__ import annotations

import pytest

from agentchat.core.identity.humans import human_agent
from agentchat.folder import render
from channels_app import services
from tests.conftest import PagesClient

pytestmark = pytest.mark.django_db


def test_a_page_post_is_human_an_api_post_is_agent_and_the_request_cannot_say(
    api_for, django_user_model
):
    alice = api_for("alice")
    assert alice.post("/api/v1/channels/", {"name": "room"}, format="json").status_code == 201
    ann = django_user_model.objects.create_user("ann", password="pw")
    browser = PagesClient(enforce_csrf_checks=True)
    browser.force_login(ann)
    token = browser.get("/").cookies["csrftoken"].value
    r = browser.post("/c/room/post/", {"title": "from a person", "csrfmiddlewaretoken": token})
    assert r.status_code == 302
    posted = alice.post(
        "/api/v1/channels/room/messages/", {"title": "from an agent"}, format="json"
    )
    assert posted.json()["sender_kind"] == "agent"
    forged = alice.post(
        "/api/v1/channels/room/messages/",
        {"title": "I am a person", "sender_kind": "human"},
        format="json",
    )
    assert forged.status_code == 400
    assert forged.json()["error"]["code"] == "UNKNOWN_FIELD"
    listed = alice.get("/api/v1/channels/room/messages/").json()["messages"]
    assert [(m["from"], m["sender_kind"]) for m in listed] == [("ann", "human"), ("alice", "agent")]


def test_an_agent_post_through_the_service_takes_the_kind_of_the_sender(django_user_model):
    person = human_agent(django_user_model.objects.create_user("bo", password="pw"))
    room = services.channel_create(name="room", created_by=person.name)
    said, _ = services.message_post(channel=room, sender=person.name, title="hi")
    audit = services.audit_post(
        channel=room, actor=person.name, event="task.created", subject="T-1", payload={}
    )
    other, _ = services.message_post(channel=room, sender="not-an-agent", title="x")
    assert (said.sender_kind, audit.sender_kind, other.sender_kind) == ("human", "human", "agent")
    text = render.message_text(said, channel="room")
    assert "\nsender_kind: human\n" in text  # the folder keeps it (and an import reads it back)
    assert "sender_kind" not in render.message_text(other, channel="room")
