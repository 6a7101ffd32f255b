"""The channel page as a chat, server side (issue 21): derived titles, the JSON answers of the
page's script, "mark unread from here", opening at the first unread, the thread view."""

from __future__ import annotations

import pytest

from agentchat.core.identity.humans import human_agent
from agentchat.dashboard.chat import title_from_body
from channels_app import services
from channels_app.models import Cursor
from tests.dashboard.test_views import _token, room  # noqa: F401 (fixtures)

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.mark.parametrize(
    ("body", "title"),
    [
        ("ok", "ok"),
        ("\n\n# Plan\nmore", "Plan"),
        ("```py\nx = 1\n```", "x = 1"),
        ("> - quoted  \t item", "quoted item"),
        ("a\u202eb", "ab"),
        ("word " * 40, ("word " * 15).strip() + "…"),
        ("x" * 200, "x" * 79 + "…"),
        ("   \n\n", ""),
    ],
)
def test_a_title_is_the_body_s_first_line(body, title):
    assert title_from_body(body) == title


def test_a_post_without_a_title_takes_the_first_line_and_answers_json(browser, room):  # noqa: F811
    token = _token(browser)
    r = browser.post(
        "/c/room/post/", {"body": "sure, go\n\ndetails", "csrfmiddlewaretoken": token}, **JSON
    )
    assert r.status_code == 201 and r.json()["title"] == "sure, go"
    page = browser.get(f"/c/room/m/{r.json()['seq']}/").content.decode()
    assert 'class="title"' not in page.split('id="messages"')[1]  # not repeated
    empty = browser.post("/c/room/post/", {"body": " ", "csrfmiddlewaretoken": token}, **JSON)
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "INVALID_VALUE"


def test_read_and_unread_answer_the_counts_and_unread_never_moves_forward(
    browser,
    ann,
    room,  # noqa: F811
):
    me = human_agent(ann)
    for n in range(4):
        services.message_post(channel=room, sender="alice", title=f"m{n}")
    token = _token(browser)
    r = browser.post("/c/room/read/", {"seq": "3", "csrfmiddlewaretoken": token}, **JSON)
    assert r.json() == {"cursor": 3, "unread": 1, "conversation": 1, "upto": 4}
    r = browser.post("/c/room/unread/", {"seq": "2", "csrfmiddlewaretoken": token}, **JSON)
    assert r.json()["cursor"] == 1 and Cursor.objects.get(agent=me, channel=room).seq == 1
    browser.post("/c/room/unread/", {"seq": "4", "csrfmiddlewaretoken": token})
    assert Cursor.objects.get(agent=me, channel=room).seq == 1  # never forward
    for bad in ("", "0", "x", "99"):
        r = browser.post("/c/room/unread/", {"seq": bad, "csrfmiddlewaretoken": token}, **JSON)
        assert r.status_code in (200, 400), bad
    assert browser.post("/c/room/unread/", {"seq": "1"}).status_code == 403  # no CSRF token


def test_a_channel_opens_at_the_first_unread_and_a_thread_shows_its_chain(
    browser,
    ann,
    room,  # noqa: F811
):
    me = human_agent(ann)
    for n in range(80):
        services.message_post(channel=room, sender="alice", title=f"m{n}", body="**b**")
    services.cursor_ack(channel=room, agent=me, seq=10)
    page = browser.get("/c/room/").content.decode()
    assert 'id="m-8"' in page and 'id="m-7"' not in page  # three above the first unread
    assert 'id="newer"' in page and 'data-floor="10"' in page
    older = browser.get("/c/room/?before=5").content.decode()
    assert 'data-floor="10"' in older  # starts before the cursor: reads on from it
    services.message_post(channel=room, sender="alice", title="reply", reply_to=5)
    services.message_post(channel=room, sender="alice", title="reply 2", reply_to=81)
    thread = browser.get("/c/room/m/81/").content.decode()
    assert thread.index('id="m-5"') < thread.index('id="m-81"') < thread.index('id="m-82"')
    assert "<strong>b</strong>" in thread.split('id="ancestors"')[1]  # the quote is markdown
