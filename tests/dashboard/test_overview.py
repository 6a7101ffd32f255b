"""The overview (a signed-in person's home), the sidebar's nav/ JSON, and issue 21's small
fixes outside the channel page: the channel form's errors beside their field in words, the
channel list by activity, who completed a done task, an unregistered agent's kind, the
favicon. The overview costs a fixed number of queries whatever the number of agents."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.identity.services import agent_get_or_create
from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.core.rules.records import Duration
from channels_app import services
from channels_app.events import event_request_parse
from channels_app.models import Channel
from locks_app import services as locks
from locks_app.models import PathLock
from locks_app.selectors import lock_paths_parse
from tasks_app import services as tasks
from tasks_app.models import Lease
from tests.tasks_app.helpers import lasting

pytestmark = pytest.mark.django_db


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user("ann", password="s3cret-pw")


def _agents_at_work(count: int) -> None:
    """``count`` agents, each with a status event, a message to ann, a leased task and a lock,
    spread over two channels; the first task's lease and the first lock expired."""
    rooms = [services.channel_create(name=f"room-{i}", created_by="boss") for i in range(2)]
    for n in range(count):
        name = f"bot-{n:02d}"
        agent_get_or_create(name=name)
        room = rooms[n % 2]
        services.event_post(
            channel=room,
            agent=name,
            request=event_request_parse(
                {"type": "status", "harness": "omp", "status": "busy", "detail": f"T-{n}"},
                agent=name,
            ),
        )
        services.message_post(channel=room, sender=name, title=f"progress {n}", to=["ann"])
        tasks.task_create(channel=room, task_id=f"T-{n}", title=f"task {n}", created_by=name)
        tasks.lease_claim(channel=room, task_id=f"T-{n}", actor=name, duration=lasting(900))
        locks.lock_acquire(
            channel=room,
            owner=name,
            paths=lock_paths_parse([f"src/{name}.py"]),
            lease_seconds=Duration.parse(600),
        )
    _expire(Lease.objects.filter(task__task_id="T-0"), PathLock.objects.filter(owner="bot-00"))


def _expire(leases, locks_=None) -> None:
    past = clock.now() - timedelta(minutes=5)
    before = past - timedelta(hours=1)
    leases.update(claimed_at=before, updated_at=before, lease_expires_at=past)
    if locks_ is not None:
        locks_.update(locked_at=before, updated_at=before, expires_at=past)


def test_the_overview_is_home_and_shows_what_each_agent_is_doing(browser):
    _agents_at_work(3)
    services.message_post(
        channel=Channel.objects.get(name="room-1"),
        sender="bot-01",
        title="May I deploy?",
        status="needs-approval",
    )
    page = browser.get("/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="ov-agent-bot-01"' in html
    agent = html[html.index('id="ov-agent-bot-01"') :]
    agent = agent[: agent.index("</li>")]
    assert "task 1" in agent and "src/bot-01.py" in agent  # its lease and its lock
    assert "busy" in agent and "May I deploy?" in agent  # its status, its latest message
    expired = html[html.index('id="ov-expired"') : html.index('id="ov-stale"')]
    assert "T-0" in expired and "T-1" not in expired
    assert "src/bot-00.py" in html[html.index('id="ov-stale"') :]
    assert "May I deploy?" in html[html.index('id="ov-approvals"') :]
    assert "room-0" in html[html.index('id="ov-unread-list"') :]
    assert b"May I deploy?" in browser.get("/overview/fragment/").content


def test_the_overview_and_nav_cost_no_query_per_agent(browser):
    _agents_at_work(5)
    browser.get("/")  # the session, the human agent: made once
    with CaptureQueriesContext(connection) as few:
        assert browser.get("/").status_code == 200
    with CaptureQueriesContext(connection) as nav_few:
        assert browser.get("/nav/").status_code == 200
    _agents_at_work_more(20)
    with CaptureQueriesContext(connection) as many:
        page = browser.get("/")
    assert page.status_code == 200 and b"bot-x19" in page.content
    with CaptureQueriesContext(connection) as nav_many:
        assert browser.get("/nav/").status_code == 200
    assert len(many) == len(few)
    assert len(nav_many) == len(nav_few)


def _agents_at_work_more(count: int) -> None:
    room = services.channel_create(name="more", created_by="boss")
    for n in range(count):
        name = f"bot-x{n:02d}"
        services.message_post(channel=room, sender=name, title=f"hi {n}", to=["ann"])
        tasks.task_create(channel=room, task_id=f"X-{n}", title="x", created_by=name)
        tasks.lease_claim(channel=room, task_id=f"X-{n}", actor=name, duration=lasting(60))
        locks.lock_acquire(
            channel=room,
            owner=name,
            paths=lock_paths_parse([f"x/{name}"]),
            lease_seconds=Duration.parse(600),
        )


def test_nav_lists_channels_by_activity_with_the_attention_counts(browser, client):
    Agent.objects.create(name="alice")
    old = services.channel_create(name="aaa-old", created_by="alice")
    new = services.channel_create(name="zzz-new", created_by="alice")
    services.message_post(channel=old, sender="alice", title="first", to=["ann"])
    services.message_post(channel=new, sender="alice", title="later")
    tasks.task_create(channel=new, task_id="T-1", title="t", created_by="alice")
    tasks.lease_claim(channel=new, task_id="T-1", actor="alice", duration=lasting(900))
    _expire(Lease.objects.all())
    state = browser.get("/nav/").json()
    assert [c["name"] for c in state["channels"]] == ["zzz-new", "aaa-old"]
    assert state["channels"][1]["unread"] == 1  # the other's are the lease's audits
    assert state["unread"] == sum(c["unread"] for c in state["channels"])
    assert state["expired"][0]["text"] == "alice's lease on T-1 in zzz-new expired"
    assert state["approvals"] == []
    listing = browser.get("/channels/").content.decode()
    assert listing.index('id="channel-zzz-new"') < listing.index('id="channel-aaa-old"')
    assert client.get("/nav/").status_code == 403  # signed out
    assert client.get("/overview/fragment/").status_code == 403


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("bad name", "no spaces or other signs"),
        ("x" * 80, "no spaces or other signs"),
        ("taken", "A channel named taken already exists"),
    ],
)
def test_a_bad_channel_name_is_said_in_words_beside_the_field(browser, name, words):
    Agent.objects.create(name="alice")
    services.channel_create(name="taken", created_by="alice")
    token = browser.get("/").cookies["csrftoken"].value
    r = browser.post("/channels/", {"name": name, "csrfmiddlewaretoken": token})
    assert r.status_code == 400
    html = r.content.decode()
    field = html[html.index('id="channel-name"') :]
    assert 'aria-invalid="true"' in field[: field.index(">")]
    error = html[html.index('id="channel-name-error"') :]
    assert words in error[: error.index("</p>")]
    assert "[A-Za-z0-9]" not in html  # no regex
    assert html.index('id="channel-name-error"') < html.index('<ul class="channels">')


def test_a_done_task_shows_who_completed_it(browser):
    Agent.objects.create(name="alice")
    room = services.channel_create(name="room", created_by="alice")
    tasks.task_create(channel=room, task_id="T-1", title="t", created_by="alice")
    tasks.lease_claim(channel=room, task_id="T-1", actor="alice", duration=lasting(900))
    tasks.lease_complete(channel=room, task_id="T-1", actor="alice")
    html = browser.get("/c/room/tasks/").content.decode()
    card = html[html.index('id="task-T-1"') :]
    card = card[: card.index("</article>")]
    assert "Done by</dt><dd>alice" in card and "unassigned" not in card


def test_an_unregistered_sender_is_an_agent_on_the_agents_page_as_on_its_messages(browser):
    room = services.channel_create(name="room", created_by="boss")
    services.message_post(channel=room, sender="imported-bot", title="from a folder")
    html = browser.get("/agents/").content.decode()
    row = html[html.index('id="agent-imported-bot"') :]
    row = row[: row.index("</tr>")]
    assert ">agent</span>" in row and "not registered" in row and "unknown" not in row


def test_the_favicon_is_served(client):
    r = client.get("/favicon.ico")
    assert r.status_code == 200
    assert b"".join(r.streaming_content if r.streaming else [r.content])[:4] == b"\x00\x00\x01\x00"
