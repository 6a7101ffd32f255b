"""The sidebar, the channel list and the overview rank channels by latest activity over every
channel a person may see, in the database (not the first 200 by name, sorted afterwards), in
a fixed number of queries; their badges count conversation, audits and events apart
(``channels_app.activity``, issue 21)."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.identity.humans import human_agent
from agentchat.core.models import Agent
from channels_app import services
from channels_app.events import event_request_parse
from channels_app.models import Channel
from tasks_app import services as tasks
from tests.dashboard.test_overview import ann  # noqa: F401 (its person; browser from conftest)
from tests.tasks_app.helpers import lasting

pytestmark = pytest.mark.django_db


def _channels(count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        services.channel_create(name=f"c{n:03d}", created_by="alice")


def test_the_sidebar_ranks_every_channel_and_shows_the_200_most_recent(browser):
    Agent.objects.create(name="alice")
    _channels(3)
    browser.get("/nav/")  # the session, the human agent: made once
    with CaptureQueriesContext(connection) as few:
        assert len(browser.get("/nav/").json()["channels"]) == 3
    _channels(202, start=3)  # 205 channels: c000 … c204, made in that order
    services.message_post(channel=Channel.objects.get(name="c000"), sender="alice", title="news")
    with CaptureQueriesContext(connection) as many:
        state = browser.get("/nav/").json()
    assert len(many) == len(few)  # no query per channel
    names = [row["name"] for row in state["channels"]]
    # c000 has a message; then the empty ones by when they were made, newest first.
    # By name and cut at 200 first, c200 … c204 would be missing.
    assert names[:3] == ["c000", "c204", "c203"] and len(names) == 200
    assert state["more"] is True and "c001" not in names
    first = browser.get("/channels/").content.decode()
    order = re.findall(r'id="channel-(c\d+)"', first)
    assert order == names  # the channel list: the same order
    assert 'href="?page=2"' in first
    rest = re.findall(r'id="channel-(c\d+)"', browser.get("/channels/?page=2").content.decode())
    assert rest == ["c005", "c004", "c003", "c002", "c001"]
    by_name = browser.get("/channels/?order=name").content.decode()
    assert re.findall(r'id="channel-(c\d+)"', by_name)[:2] == ["c000", "c001"]
    assert browser.get("/channels/?page=0").status_code == 400
    assert browser.get("/channels/?page=x").status_code == 400


def test_a_channel_nobody_may_see_is_not_ranked(browser):
    Agent.objects.create(name="alice")
    services.channel_create(name="open", created_by="alice")
    services.channel_create(
        name="secret", created_by="alice", members=["alice"], visibility="members"
    )
    names = [row["name"] for row in browser.get("/nav/").json()["channels"]]
    assert names == ["open"]


def test_the_badges_count_conversation_not_audits(browser, ann):  # noqa: F811
    Agent.objects.create(name="alice")
    room = services.channel_create(name="room", created_by="alice")
    services.message_post(channel=room, sender="alice", title="for you", to=["ann"])
    tasks.task_create(channel=room, task_id="T-1", title="t", created_by="alice")  # an audit
    tasks.lease_claim(channel=room, task_id="T-1", actor="alice", duration=lasting(900))
    services.event_post(
        channel=room,
        agent="alice",
        request=event_request_parse(
            {"type": "status", "harness": "omp", "status": "busy"}, agent="alice"
        ),
    )
    services.message_post(channel=room, sender="alice", title="everyone")
    me = human_agent(ann)
    all_unread = room.messages.exclude(sender=me.name).count()
    assert all_unread > 2  # the audits and the event are unread too
    state = browser.get("/nav/").json()
    assert state["channels"][0]["unread"] == 2 and state["unread"] == 2
    listing = browser.get("/channels/").content.decode()
    assert 'title="unread conversation for you">2</span>' in listing
    named = browser.get("/channels/?order=name").content.decode()
    assert 'title="unread conversation for you">2</span>' in named
    overview = browser.get("/").content.decode()
    unread_list = overview[overview.index('id="ov-unread-list"') :]
    assert re.search(r">room</a> <span class=\"badge\">2<", unread_list), unread_list[:300]
    page = browser.get("/c/room/").content.decode()
    assert f'data-unread="{all_unread}" data-conversation="2"' in page  # the read bar: both
