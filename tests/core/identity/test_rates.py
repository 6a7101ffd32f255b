"""The post budget (AGENTCHAT_POST_RATE): a token bucket per top-level agent, taken from by
every write that posts a message, in the posting transaction."""

from __future__ import annotations

import pytest

from agentchat.core.identity.services import agent_get_or_create
from agentchat.core.models import Agent, RateBucket
from agentchat.core.rules.errors import AppError
from channels_app.events import event_request_parse
from channels_app.models import Message
from channels_app.services import channel_create, event_post, message_post
from tasks_app import services as tasks
from tests.errors import error_code

pytestmark = pytest.mark.django_db


@pytest.fixture
def room(make_agent):
    make_agent("alice")
    return channel_create(name="room", created_by="alice")


def post(room, sender="alice", **fields):
    fields.setdefault("title", "hello")
    return message_post(channel=room, sender=sender, **fields)


def refused(call) -> AppError:
    with pytest.raises(AppError) as exc:
        call()
    assert exc.value.code == "RATE_LIMITED"
    return exc.value


def test_the_bucket_empties_then_refills_with_the_clock(room, clock, settings):
    settings.AGENTCHAT_POST_RATE = "10/min"  # the EP's rate
    for _ in range(10):
        post(room)
    error = refused(lambda: post(room))
    assert error.detail == {"agent": "alice", "limit": 10, "period_seconds": 60.0, "retry_after": 6}
    clock.advance(5)
    assert refused(lambda: post(room)).detail["retry_after"] == 1
    clock.advance(1)
    post(room)  # one token back after 6 s
    refused(lambda: post(room))
    clock.advance(3600)  # refills to full, never beyond
    for _ in range(10):
        post(room)
    refused(lambda: post(room))
    assert Message.objects.filter(channel=room).count() == 21


def test_the_answer_is_429_with_retry_after(alice, room, settings):
    settings.AGENTCHAT_POST_RATE = "1/hour"
    assert (
        alice.post("/api/v1/channels/room/messages/", {"title": "a"}, format="json").status_code
        == 201
    )
    answer = alice.post("/api/v1/channels/room/messages/", {"title": "b"}, format="json")
    assert error_code(answer) == "RATE_LIMITED"
    assert answer["Retry-After"] == "3600"
    assert answer.json()["error"]["detail"]["retry_after"] == 3600
    # Reads are never limited.
    assert alice.get("/api/v1/channels/room/messages/").status_code == 200
    assert alice.post("/api/v1/channels/room/read/", {}, format="json").status_code == 200


def test_sub_agents_share_their_parents_bucket(room, settings):
    settings.AGENTCHAT_POST_RATE = "3/hour"
    agent_get_or_create(name="alice.critic")
    post(room, sender="alice.critic")
    post(room, sender="alice.critic.deep")
    post(room)
    refused(lambda: post(room, sender="alice.critic"))
    refused(lambda: post(room))
    assert list(RateBucket.objects.values_list("name", flat=True)) == ["alice"]


def test_retries_and_refused_posts_cost_nothing(room, settings):
    settings.AGENTCHAT_POST_RATE = "3/hour"
    first, created = post(room, message_id="m-1")
    assert created
    for _ in range(5):
        again, created = post(room, message_id="m-1")
        assert (again.pk, created) == (first.pk, False)
    for _ in range(5):
        with pytest.raises(AppError) as exc:
            post(room, status="task.claimed")  # refused for its status
        assert exc.value.code == "STATUS_RESERVED"
        with pytest.raises(AppError):
            post(room, reply_to=999)  # refused after validation: rolled back with the budget
    post(room)
    post(room)
    refused(lambda: post(room))


def test_events_and_audited_changes_are_posts_too(room, settings):
    settings.AGENTCHAT_POST_RATE = "2/hour"
    body = {"type": "status", "harness": "h", "status": "busy"}
    event_post(channel=room, agent="alice", request=event_request_parse(body, agent="alice"))
    tasks.task_create(channel=room, task_id="T-1", title="one", created_by="alice")
    refused(lambda: tasks.task_create(channel=room, task_id="T-2", title="two", created_by="alice"))
    assert not tasks_exist("T-2")


def tasks_exist(task_id: str) -> bool:
    from tasks_app.models import Task

    return Task.objects.filter(task_id=task_id).exists()


def test_people_and_an_empty_setting_are_not_limited(room, settings):
    settings.AGENTCHAT_POST_RATE = "1/hour"
    Agent.objects.create(name="ann", kind="human")
    for _ in range(5):
        post(room, sender="ann")
    settings.AGENTCHAT_POST_RATE = ""
    for _ in range(5):
        post(room)
    assert not RateBucket.objects.exists()


def test_channel_creation_marker_claims_and_contact_changes_take_from_the_budget(
    alice, room, settings
):
    """Writes that make a row without a message are budgeted too (the hostile run: an agent
    could make channels, claim markers and rewrite contacts without limit)."""
    settings.AGENTCHAT_POST_RATE = "3/hour"
    assert alice.post("/api/v1/channels/", {"name": "one"}, format="json").status_code == 201
    assert alice.post("/api/v1/channels/room/claims/m1/", format="json").status_code == 201
    card = {"id": "carol", "display_name": "Carol", "endpoint": "https://example.test/carol"}
    put = f"/v1/agents/alice/contacts/{card['id']}"
    assert alice.put(put, card, format="json").status_code == 201
    # The same card again changes nothing and costs nothing; refused writes cost nothing.
    assert alice.put(put, card, format="json").status_code == 200
    assert alice.post("/api/v1/channels/room/claims/m1/", format="json").status_code == 409
    for answer in (
        alice.post("/api/v1/channels/", {"name": "two"}, format="json"),
        alice.post("/api/v1/channels/room/claims/m2/", format="json"),
        alice.put(put, {**card, "display_name": "Carol B"}, format="json"),
        alice.post("/api/v1/channels/room/messages/", {"title": "x"}, format="json"),
    ):
        assert (answer.status_code, error_code(answer)) == (429, "RATE_LIMITED")
        assert int(answer["Retry-After"]) >= 1
    assert not Message.objects.filter(channel__name__in=["two"]).exists()
    from channels_app.models import Channel, Contact, MarkerClaim

    assert not Channel.objects.filter(name="two").exists()
    assert list(MarkerClaim.objects.values_list("marker", flat=True)) == ["m1"]
    assert Contact.objects.get(contact_id="carol").card["display_name"] == "Carol"


def test_people_have_no_budget_for_channels(settings):
    settings.AGENTCHAT_POST_RATE = "1/hour"
    agent_get_or_create(name="pat", kind=Agent.Kind.HUMAN)
    for name in ("p1", "p2", "p3"):
        channel_create(name=name, created_by="pat")
    assert not RateBucket.objects.exists()
