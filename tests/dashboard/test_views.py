"""The dashboard's first pages through Django's test client (session and CSRF middleware on):
sign-in, the human identity it makes, the channel list and its create form."""

from __future__ import annotations

import pytest
from django.test import Client

from agentchat.core.identity.humans import human_agent, human_name
from agentchat.core.models import Agent
from agentchat.core.rules.records import Duration
from channels_app import services
from channels_app.events import event_request_parse
from channels_app.models import Channel, Cursor
from locks_app.selectors import lock_paths_parse
from tests.conftest import PagesClient
from tests.tasks_app.helpers import lasting

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/", "/channels/", "/help/", "/channels/?after=x"])
def test_anonymous_pages_redirect_to_the_sign_in_form(client, path):
    r = client.get(path)
    assert r.status_code == 302
    assert r["Location"].startswith("/signin/?next=")


def test_signing_in_makes_the_human_agent_and_opens_the_channel_list(ann):
    client = PagesClient(enforce_csrf_checks=True)
    form = client.get("/signin/")
    assert form.status_code == 200
    token = form.cookies["csrftoken"].value
    bad = client.post(
        "/signin/", {"username": "Ann Lee", "password": "no", "csrfmiddlewaretoken": token}
    )
    assert bad.status_code == 200 and b"do not match" in bad.content
    r = client.post(
        "/signin/", {"username": "Ann Lee", "password": "s3cret-pw", "csrfmiddlewaretoken": token}
    )
    assert (r.status_code, r["Location"]) == (302, "/")
    page = client.get("/")
    assert page.status_code == 200
    agent = Agent.objects.get(user=ann)
    assert (agent.name, agent.kind) == ("ann-lee", Agent.Kind.HUMAN)
    assert b"ann-lee" in page.content


def test_a_sign_in_without_the_csrf_token_is_refused(ann):
    client = PagesClient(enforce_csrf_checks=True)
    r = client.post("/signin/", {"username": "Ann Lee", "password": "s3cret-pw"})
    assert r.status_code == 403


@pytest.mark.parametrize(
    ("username", "name"),
    [("Ann Lee", "ann-lee"), ("bob@example.com", "bob-example.com"), ("__x__", "x"),
     ("Ünïcode", "n-code"), ("...", "user-7"), ("a" * 150, "a" * 54)],
)  # fmt: skip
def test_human_names_follow_the_agent_name_rule(username, name):
    assert human_name(username, user_id=7) == name


def test_an_existing_agent_is_never_linked_implicitly(django_user_model):
    taken = Agent.objects.create(name="bob")
    user = django_user_model.objects.create_user("bob", password="pw")
    agent = human_agent(user)
    assert agent.name == "bob.human" and agent.user == user and agent.kind == Agent.Kind.HUMAN
    taken.refresh_from_db()
    assert taken.user is None
    assert human_agent(user) == agent  # made once


def test_the_list_shows_what_the_human_may_see_with_unread_counts(browser, ann):
    me = human_agent(ann)
    Agent.objects.create(name="alice")
    services.channel_create(name="open-room", created_by="alice", topic="hello <b>x</b>")
    services.channel_create(
        name="secret", created_by="alice", members=["alice"], visibility="members"
    )
    mine = services.channel_create(name="mine", created_by=me.name, members=[me.name, "alice"])
    room = Channel.objects.get(name="open-room")
    for n in range(3):
        services.message_post(channel=room, sender="alice", title=f"m{n}")
    services.message_post(channel=mine, sender=me.name, title="my own")
    page = browser.get("/channels/").content.decode()
    assert "open-room" in page and "mine" in page
    assert "secret" not in page
    assert "hello &lt;b&gt;x&lt;/b&gt;" in page  # escaped
    assert '<span class="badge" title="unread conversation for you">3</span>' in page
    assert "my own" in page  # the last message of each channel
    assert not Cursor.objects.filter(agent=me).exists()  # looking marks nothing read


def test_creating_a_channel_from_the_form(browser, ann):
    token = browser.get("/").cookies["csrftoken"].value
    r = browser.post(
        "/channels/",
        {"name": "new-room", "topic": "t", "members": "", "csrfmiddlewaretoken": token},
    )
    assert r.status_code == 302
    channel = Channel.objects.get(name="new-room")
    assert channel.created_by == human_agent(ann).name
    again = browser.post("/channels/", {"name": "NEW-room", "csrfmiddlewaretoken": token})
    assert again.status_code == 400 and b"already exists" in again.content
    bad = browser.post("/channels/", {"name": "bad name\x00", "csrfmiddlewaretoken": token})
    assert bad.status_code == 400
    assert Channel.objects.count() == 1


def test_the_create_form_needs_the_csrf_token(browser):
    assert browser.post("/channels/", {"name": "x"}).status_code == 403
    assert not Channel.objects.exists()


@pytest.mark.parametrize("after", ["%ff", "%ED%B3%BF", "a%00", "x" * 5000, "..%2F", "a%0A"])
def test_a_hostile_page_cursor_is_a_400(browser, after):
    assert browser.get("/channels/", QUERY_STRING=f"after={after}").status_code == 400


@pytest.fixture
def room(ann):
    Agent.objects.create(name="alice")
    channel = services.channel_create(name="room", created_by="alice", topic="the room")
    return channel


def _token(client: Client) -> str:
    return client.get("/").cookies["csrftoken"].value


def test_the_channel_page_shows_messages_threads_and_the_first_unread(browser, ann, room):
    me = human_agent(ann)
    first, _ = services.message_post(
        channel=room, sender="alice", title="Question", body="Why **x**?"
    )
    services.cursor_ack(channel=room, agent=me, seq=first.seq)
    services.message_post(channel=room, sender="alice", title="to bob", to=["bob"])
    services.message_post(
        channel=room, sender="alice", title="Answer", body="<script>alert(1)</script>", reply_to=1
    )
    page = browser.get("/c/room/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "<strong>x</strong>" in text  # markdown rendered
    assert "<script>alert(1)</script>" not in text and "&lt;script&gt;" in text
    assert 'href="#m-1"' in text and "↪ #1 alice: Question" in text  # the reply quotes its parent
    assert "→ bob" in text and "→ everyone" in text
    # the first unread relevant message (#2 is bob's, not mine) is #3
    assert text.index('id="first-unread"') < text.index('id="m-3"')
    assert text.index('id="m-2"') < text.index('id="first-unread"')
    assert "default-src 'self'" in page["Content-Security-Policy"]
    assert Cursor.objects.get(agent=me, channel=room).seq == 1  # opening moved nothing


def test_mark_read_acks_the_highest_seq_shown_never_back(browser, ann, room):
    me = human_agent(ann)
    for n in range(3):
        services.message_post(channel=room, sender="alice", title=f"m{n}")
    token = _token(browser)
    assert (
        browser.post("/c/room/read/", {"seq": "2", "csrfmiddlewaretoken": token}).status_code == 302
    )
    assert Cursor.objects.get(agent=me, channel=room).seq == 2
    browser.post("/c/room/read/", {"seq": "1", "csrfmiddlewaretoken": token})
    assert Cursor.objects.get(agent=me, channel=room).seq == 2
    for bad in ("", "x", "99", "-1", "٣"):
        r = browser.post("/c/room/read/", {"seq": bad, "csrfmiddlewaretoken": token})
        assert r.status_code == 400, bad
    assert browser.post("/c/room/read/", {"seq": "3"}).status_code == 403  # no CSRF token
    assert Cursor.objects.get(agent=me, channel=room).seq == 2


def test_posting_from_the_page_posts_as_me(browser, ann, room):
    token = _token(browser)
    services.message_post(channel=room, sender="alice", title="Q")
    r = browser.post(
        "/c/room/post/",
        {"title": "Re: Q", "body": "yes", "to": "alice", "reply_to": "1", "status": "ack",
         "csrfmiddlewaretoken": token},
    )  # fmt: skip
    assert r.status_code == 302 and r["Location"] == "/c/room/#m-2"
    posted = room.messages.get(seq=2)
    assert (posted.sender, posted.to, posted.reply_to, posted.status) == (
        human_agent(ann).name,
        ["alice"],
        1,
        "ack",
    )
    refused = [
        {"title": ""},
        {"title": "x", "reply_to": "77"},
        {"title": "x\u0000"},
        {"title": "x", "to": "Not A Name"},
        {"title": "x", "status": "event.status"},
    ]
    for bad in refused:
        assert (
            browser.post("/c/room/post/", {**bad, "csrfmiddlewaretoken": token}).status_code == 400
        )
    assert room.messages.count() == 2


def test_a_members_only_channel_is_a_404_to_a_non_member(browser, room):
    services.channel_create(
        name="hidden", created_by="alice", members=["alice"], visibility="members"
    )
    for path in ("/c/hidden/", "/c/hidden/fragment/", "/c/nope/"):
        assert browser.get(path).status_code == 404, path
    token = _token(browser)
    assert (
        browser.post("/c/hidden/post/", {"title": "x", "csrfmiddlewaretoken": token}).status_code
        == 404
    )


def test_the_fragment_is_the_html_after_a_seq_and_403_when_signed_out(client, browser, room):
    for n in range(3):
        services.message_post(channel=room, sender="alice", title=f"m{n}", body="**b**")
    html = browser.get("/c/room/fragment/", {"after": "1"}).content.decode()
    assert 'id="m-1"' not in html and 'id="m-2"' in html and 'id="m-3"' in html
    assert "<strong>b</strong>" in html
    assert client.get("/c/room/fragment/").status_code == 403
    assert browser.get("/c/room/fragment/", {"after": "x"}).status_code == 400


def test_the_fragment_says_more_when_its_page_was_cut(browser, room):
    # Three messages of 400 KB: the read's 1 MB budget cuts the page after two of them, far
    # below FRAGMENT_MESSAGES; the live page fetches again only when the fragment says so.
    for n in range(3):
        services.message_post(channel=room, sender="alice", title=f"m{n}", body="x" * 400_000)
    first = browser.get("/c/room/fragment/", {"after": "0"})
    html = first.content.decode()
    assert 'id="m-2"' in html and 'id="m-3"' not in html
    assert first["AgentChat-More"] == "1"
    rest = browser.get("/c/room/fragment/", {"after": "2"})
    assert 'id="m-3"' in rest.content.decode()
    assert rest["AgentChat-More"] == "0"


def test_the_tasks_board_groups_by_status_with_leases_and_blockers(browser, room, clock):
    from tasks_app import services as tasks

    tasks.task_create(channel=room, task_id="T-1", title="Schema", created_by="alice")
    tasks.task_create(
        channel=room, task_id="T-2", title="API", created_by="alice", depends_on=["T-1"]
    )
    tasks.task_create(channel=room, task_id="T-3", title="Docs <i>x</i>", created_by="alice")
    tasks.lease_claim(channel=room, task_id="T-1", actor="alice", duration=lasting(60))
    tasks.lease_claim(channel=room, task_id="T-3", actor="alice", duration=lasting(60))
    clock.advance(120)  # both leases expired
    page = browser.get("/c/room/tasks/")
    assert page.status_code == 200
    text = page.content.decode().replace("\xa0", " ")  # Django's "2\xa0minutes"
    column = {
        status: text.index(f'id="col-{status}"') for status in ("open", "in_progress", "blocked")
    }
    assert column["open"] < text.index('id="task-T-2"') < column["in_progress"]
    assert column["in_progress"] < text.index('id="task-T-1"') < column["blocked"]
    assert "T-1 (in_progress)" in text  # what blocks T-2
    assert (
        'class="task lease-expired"' in text and "expired 1 minute ago" in text
    )  # 60 s leases, 120 s later
    assert "Docs &lt;i&gt;x&lt;/i&gt;" in text
    assert browser.get("/c/room/tasks/", {"after": "bad id!"}).status_code == 400


def test_the_locks_page_lists_active_and_expired_locks(browser, room, clock):
    from locks_app import services as locks

    held = locks.lock_acquire(
        channel=room,
        owner="alice",
        paths=lock_paths_parse(["src/api.py", "docs"]),
        lease_seconds=Duration.parse(600),
    )
    gone = locks.lock_acquire(
        channel=room,
        owner="alice",
        paths=lock_paths_parse(["old.txt"]),
        lease_seconds=Duration.parse(1),
    )
    clock.advance(5)
    text = browser.get("/c/room/locks/").content.decode().replace("\xa0", " ")
    assert f'id="lock-{held.lock_id}" class=""' in text
    assert f'id="lock-{gone.lock_id}" class="expired"' in text
    assert "<code>src/api.py</code>" in text and "in 9 minutes" in text
    assert browser.get("/c/room/locks/", {"after": "bad id!"}).status_code == 400


def post_event(channel: Channel, agent: str, body: dict) -> None:
    services.event_post(
        channel=channel, agent=agent, request=event_request_parse(body, agent=agent)
    )


def test_the_agents_page_shows_presence_across_visible_channels(browser, ann, room):
    post_event(
        room, "alice", {"type": "status", "harness": "omp", "status": "busy", "detail": "T-1"}
    )
    post_event(room, "alice", {"type": "capability", "harness": "omp", "primitives": ["wait"]})
    Agent.objects.create(name="carol")
    services.channel_create(name="hid", created_by="carol", members=["carol"], visibility="members")
    post_event(
        Channel.objects.get(name="hid"),
        "carol",
        {"type": "status", "harness": "x", "status": "blocked"},
    )
    text = browser.get("/agents/").content.decode()
    alice = text[text.index('id="agent-alice"') :]
    alice = alice[: alice.index("</tr>")]
    assert "busy" in alice and "T-1" in alice and "wait" in alice
    carol = text[text.index('id="agent-carol"') :]
    assert "blocked" not in carol[: carol.index("</tr>")]  # seen only in a channel I cannot see
    assert 'id="agent-ann-lee"' in text


def test_the_state_page_renders_the_summary(browser, room):
    services.message_post(channel=room, sender="alice", title="Decision: use <b>X</b>", body="ok")
    text = browser.get("/c/room/state/").content.decode()
    assert "<h2>Decisions</h2>" in text
    assert "use &lt;b&gt;X&lt;/b&gt;" in text  # a title is text, never markup
    assert "never compacted" in text


def test_the_search_page_finds_what_i_may_see(browser, room, client):
    services.message_post(channel=room, sender="alice", title="Deploy <b>plan</b>", body="**go**")
    services.channel_create(
        name="hidden", created_by="alice", members=["alice"], visibility="members"
    )
    services.message_post(
        channel=Channel.objects.get(name="hidden"), sender="alice", title="deploy"
    )
    text = browser.get("/search/", {"q": "deploy"}).content.decode()
    assert 'id="r-room-1"' in text and 'id="r-hidden-1"' not in text
    assert "Deploy &lt;b&gt;plan&lt;/b&gt;" in text and "<strong>go</strong>" in text
    assert browser.get("/search/", {"q": "deploy", "channel": "hidden"}).status_code == 400
    assert browser.get("/search/", {"q": "x" * 500}).status_code == 400
    assert b"Nothing matched" in browser.get("/search/", {"q": "nothing"}).content
    assert client.get("/search/", {"q": "deploy"}).status_code == 302  # signed out


PAGES = ["/", "/channels/", "/help/", "/agents/", "/approvals/", "/search/?q=x", "/c/room/",
         "/c/room/tasks/", "/c/room/locks/", "/c/room/state/"]  # fmt: skip
FORMS = ["/channels/", "/c/room/post/", "/c/room/read/", "/approvals/room/1/"]


@pytest.mark.parametrize("path", PAGES)
def test_every_page_needs_a_sign_in_and_then_shows(client, browser, room, path):
    signed_out = client.get(path)
    assert signed_out.status_code == 302 and signed_out["Location"].startswith("/signin/")
    assert browser.get(path).status_code == 200


@pytest.mark.parametrize("path", [p.replace("/room/", "/nope/") for p in PAGES if "/c/" in p])
def test_every_channel_page_of_a_channel_i_cannot_see_is_a_404(browser, room, path):
    assert browser.get(path).status_code == 404


@pytest.mark.parametrize("path", FORMS)
def test_every_form_needs_the_csrf_token(browser, room, path):
    services.message_post(channel=room, sender="alice", title="q", status="needs-approval")
    before = room.messages.count()
    assert browser.post(path, {"title": "x", "seq": "1", "decision": "approved"}).status_code == 403
    assert room.messages.count() == before


@pytest.mark.parametrize("path", ["/c/room/post/", "/c/room/read/", "/approvals/room/1/"])
def test_the_forms_take_no_get(browser, room, path):
    assert browser.get(path).status_code == 405
