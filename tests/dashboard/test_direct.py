"""The dashboard's direct messages (HTTP v1 envelopes) through Django's test client with CSRF
checks on: the conversations by peer, a conversation grouped by conversation_id with the
receipts on the messages they answer, the live fragment, sending from the form (and its
errors), a receipt from the page, mark read, and the staff-only monitor."""

from __future__ import annotations

import re

import pytest
from django.test import Client

from agentchat.core.identity.humans import human_agent
from agentchat.core.identity.services import agent_get_or_create
from channels_app import services
from channels_app.inbox import inbox_page
from channels_app.models import Delivery
from tests.conftest import PagesClient

pytestmark = pytest.mark.django_db


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user("ann", password="s3cret-pw")


@pytest.fixture
def me(ann):
    return human_agent(ann)


@pytest.fixture
def alice():
    return agent_get_or_create(name="alice")


@pytest.fixture
def page(ann) -> Client:
    client = PagesClient(enforce_csrf_checks=True)
    client.force_login(ann)
    return client


def _csrf(client: Client, path: str) -> str:
    r = client.get(path)
    assert r.status_code == 200, r.content[:500]
    return (
        r.cookies["csrftoken"].value
        if "csrftoken" in r.cookies
        else client.cookies["csrftoken"].value
    )


def _ids(html: str, pattern: str) -> list[str]:
    return re.findall(pattern, html)


def test_the_conversations_are_mine_by_peer_newest_first_with_unread_counts(page, me, alice):
    bob = agent_get_or_create(name="bob")
    carol = agent_get_or_create(name="carol")
    services.envelope_send(sender=alice, to=me.name, text="first from alice")
    services.envelope_send(sender=bob, to=me.name, text="from bob")
    services.envelope_send(sender=bob, to=me.name, text="bob again")
    services.envelope_send(sender=carol, to="bob", text="not ann's business")
    r = page.get("/dm/")
    html = r.content.decode()
    assert r.status_code == 200
    assert _ids(html, r'<li id="peer-([a-z]+)"') == ["bob", "alice"]  # newest first
    assert "carol" not in html and "not ann&#x27;s business" not in html
    bob_row = html[html.index('id="peer-bob"') : html.index('id="peer-alice"')]
    assert '<span class="badge" title="unread messages for you">2</span>' in bob_row
    assert "bob again" in bob_row
    services.envelope_send(sender=alice, to=me.name, text="alice is newest now")
    assert _ids(page.get("/dm/").content.decode(), r'<li id="peer-([a-z]+)"') == ["alice", "bob"]
    assert 'id="nav-direct"' in html


def test_a_conversation_is_grouped_by_conversation_id_and_shows_the_envelope_fields(
    page, me, alice
):
    one = services.envelope_send(
        sender=alice,
        to=me.name,
        conversation_id="task-42",
        correlation_id="request-7",
        text="Please *inspect* this",
        data={"priority": 2},
        content_type="application/vnd.example+json",
        metadata={"trace_id": "abc123"},
    )
    other = services.envelope_send(
        sender=alice, to=me.name, conversation_id="task-43", text="another thread"
    )
    mine = services.envelope_send(sender=me, to="alice", conversation_id="task-42", text="on it")
    html = page.get("/dm/alice/").content.decode()
    sections = _ids(html, r'<section class="conversation" data-conversation="([^"]+)"')
    assert sections == ["task-42", "task-43"]
    first = html[
        html.index('data-conversation="task-42"') : html.index('data-conversation="task-43"')
    ]
    assert f'id="m-{one.message.seq}"' in first and f'id="m-{mine.message.seq}"' in first
    assert f'id="m-{other.message.seq}"' not in first
    assert "<em>inspect</em>" in first  # the text, as markdown
    for shown in (one.envelope()["id"], "request-7", "application/vnd.example+json"):
        assert shown in first
    assert "&quot;priority&quot;: 2" in first and "trace_id" in first  # data, metadata
    assert "envelope-message" in first
    # Only that conversation, and the form sends into it.
    only = page.get("/dm/alice/?conversation=task-43").content.decode()
    assert f'id="m-{other.message.seq}"' in only and f'id="m-{one.message.seq}"' not in only
    assert 'name="conversation_id" maxlength="128" value="task-43"' in only


def test_a_receipt_shows_on_the_message_it_answers_with_its_status_and_time(page, me, alice):
    sent = services.envelope_send(sender=me, to="alice", conversation_id="c1", text="ping")
    receipt = services.receipt_send(
        sender=alice, message_id=sent.envelope()["id"], status="processed", detail="done it"
    )
    html = page.get("/dm/alice/").content.decode()
    item = html[html.index(f'id="m-{sent.message.seq}"') :]
    item = item[: item.index("</li>\n", item.index('class="receipts"'))]
    assert f'id="r-{receipt.message.seq}"' in item and f'data-for="{sent.message.seq}"' in item
    assert '<span class="receipt-status">processed</span>' in item
    assert "done it" in item and 'by <span class="sender">alice</span>' in item
    assert receipt.message.ts.strftime("%Y-%m-%d %H:%M:%S") in item
    assert f'id="m-{receipt.message.seq}"' not in html  # on its message, not an item of its own


def test_the_fragment_gives_what_is_new_and_the_receipts_to_place(page, me, alice):
    sent = services.envelope_send(sender=me, to="alice", conversation_id="c1", text="ping")
    seen = sent.message.seq
    services.receipt_send(sender=alice, message_id=sent.envelope()["id"], status="read")
    new = services.envelope_send(sender=alice, to=me.name, conversation_id="c2", text="pong")
    r = page.get(f"/dm/alice/fragment/?after={seen}")
    html = r.content.decode()
    assert r.status_code == 200 and r["AgentChat-More"] == "0"
    assert r["AgentChat-Last"] == str(new.message.seq)
    assert 'data-conversation="c2"' in html and f'id="m-{new.message.seq}"' in html
    assert f'data-for="{seen}"' in html and "receipt-read" in html
    # A filtered page still moves past the other conversations' messages.
    r = page.get(f"/dm/alice/fragment/?after={seen}&conversation=c1")
    assert f'id="m-{new.message.seq}"' not in r.content.decode()
    assert r["AgentChat-Last"] == str(new.message.seq)
    assert page.get("/dm/alice/fragment/?after=x").status_code == 400
    assert PagesClient().get("/dm/alice/fragment/?after=0").status_code == 403


def test_sending_from_the_form_makes_an_envelope_and_lands_on_it(page, me, alice):
    token = _csrf(page, "/dm/alice/")
    r = page.post(
        "/dm/alice/",
        {
            "csrfmiddlewaretoken": token,
            "conversation_id": "task-9",
            "correlation_id": "",
            "text": "hello **alice**",
            "data": '{"n": 1}',
            "content_type": "",
        },
    )
    assert r.status_code == 302
    inbox = inbox_page(agent=alice, cursor=0, limit=10)
    assert len(inbox.items) == 1
    delivery = Delivery.objects.select_related("message").get(recipient=alice)
    assert r["Location"] == f"/dm/alice/#m-{delivery.message.seq}"
    assert (delivery.sender, delivery.kind) == (me.name, "message")
    message = delivery.message
    assert (message.body, message.data, message.conversation_id) == (
        "hello **alice**",
        {"n": 1},
        "task-9",
    )
    assert message.sender_kind == "human"
    # From the list, to anyone by name.
    r = page.post("/dm/", {"csrfmiddlewaretoken": token, "to": "alice", "text": "second"})
    assert r.status_code == 302 and r["Location"].startswith("/dm/alice/#m-")


def test_the_form_needs_its_csrf_token(page, alice):
    r = page.post("/dm/alice/", {"text": "no token"})
    assert r.status_code == 403
    assert not Delivery.objects.exists()


@pytest.mark.parametrize(
    ("path", "fields", "code"),
    [
        ("/dm/", {"to": "nobody", "text": "x"}, "AGENT_NOT_FOUND"),
        ("/dm/", {"to": "Not A Name", "text": "x"}, "INVALID_NAME"),
        ("/dm/alice/", {"text": "x", "data": "{nope"}, "INVALID_JSON"),
        ("/dm/alice/", {"text": ""}, "MISSING_FIELD"),
        ("/dm/alice/", {"text": "x", "conversation_id": "two\nlines"}, "INVALID_VALUE"),
        ("/dm/alice/", {"text": "x", "correlation_id": "a\u202eb"}, "INVISIBLE_CHARACTER"),
    ],
)
def test_a_refused_send_shows_why_and_keeps_the_form(page, alice, path, fields, code):
    token = _csrf(page, path)
    r = page.post(path, {"csrfmiddlewaretoken": token, **fields})
    html = r.content.decode()
    assert r.status_code == 400
    assert f"<code>{code}</code>" in html and 'role="alert"' in html
    if fields.get("text"):
        assert f">{fields['text']}</textarea>" in html
    assert not Delivery.objects.exists()


def test_a_receipt_from_the_page_goes_to_the_sender(page, me, alice):
    got = services.envelope_send(sender=alice, to=me.name, text="did you get it")
    html = page.get("/dm/alice/").content.decode()
    assert 'class="receipt-form"' in html
    token = page.cookies["csrftoken"].value
    r = page.post(
        "/dm/alice/receipt/",
        {"csrfmiddlewaretoken": token, "message_id": got.envelope()["id"], "status": "read"},
    )
    assert r.status_code == 302 and r["Location"] == f"/dm/alice/#m-{got.message.seq}"
    receipt = Delivery.objects.select_related("message").get(recipient=alice)
    assert receipt.kind == "receipt"
    assert receipt.message.data == {
        "message_id": got.envelope()["id"],
        "status": "read",
        "detail": None,
    }
    bad = page.post(
        "/dm/alice/receipt/",
        {"csrfmiddlewaretoken": token, "message_id": "msg_unknown", "status": "read"},
    )
    assert bad.status_code == 400 and b"no envelope" in bad.content


def test_mark_read_clears_the_unread_count(page, me, alice):
    sent = services.envelope_send(sender=alice, to=me.name, text="unread")
    assert b'<span class="badge"' in page.get("/dm/").content
    token = page.cookies["csrftoken"].value
    r = page.post("/dm/alice/read/", {"csrfmiddlewaretoken": token, "seq": sent.message.seq})
    assert r.status_code == 302
    assert b'<span class="badge"' not in page.get("/dm/").content


def test_someone_else_sees_nothing_of_my_pairs(django_user_model, me, alice):
    services.envelope_send(sender=alice, to=me.name, text="for ann only")
    carl = django_user_model.objects.create_user("carl", password="pw-carl-123")
    other = PagesClient()
    other.force_login(carl)
    assert b"for ann only" not in other.get("/dm/").content
    assert b"for ann only" not in other.get("/dm/alice/").content
    assert b"for ann only" not in other.get("/dm/ann/").content
    assert other.get("/dm/nobody/").status_code == 404
    assert other.get("/dm/Bad%20Name/").status_code == 404
    assert other.get("/monitor/").status_code == 404  # staff only


def test_a_hostile_text_is_sanitized(page, me, alice):
    services.envelope_send(
        sender=alice, to=me.name, text="<script>alert(1)</script>[x](javascript:alert(1)) **b**"
    )
    html = page.get("/dm/alice/").content.decode()
    body = html[html.index('class="body"') : html.index("</div>", html.index('class="body"'))]
    assert "<script" not in body and "&lt;script&gt;" in body  # shown as text
    assert 'href="javascript' not in body and "<strong>b</strong>" in body


def test_the_monitor_fans_in_every_inbox_for_staff_in_pages(django_user_model, alice):
    boss = django_user_model.objects.create_user("boss", password="pw-boss-123", is_staff=True)
    client = PagesClient()
    client.force_login(boss)
    bob = agent_get_or_create(name="bob")
    for n in range(3):
        services.envelope_send(sender=alice, to="bob", text=f"to bob {n}")
        services.envelope_send(sender=bob, to="alice", text=f"to alice {n}")
    r = client.get("/monitor/")
    html = r.content.decode()
    assert r.status_code == 200 and 'id="nav-monitor"' in html
    rows = _ids(html, r'<tr id="d-([a-z]+-\d+)"')
    assert sorted(rows) == sorted([f"bob-{n}" for n in range(3)] + [f"alice-{n}" for n in range(3)])
    assert "to bob 2" in html and "to alice 0" in html
    assert "<form" not in html[html.index("<h1>") :].split("<h2>Inboxes")[0]  # read-only
    nxt = re.search(r'id="monitor-next" href="\?cursor=([^"]+)"', html)[1]
    assert "Check for newer deliveries" in html
    services.envelope_send(sender=alice, to="bob", text="later one")
    later = client.get(f"/monitor/?cursor={nxt}").content.decode()
    assert _ids(later, r'<tr id="d-([a-z]+-\d+)"') == ["bob-3"]
    assert client.get("/monitor/?cursor=not*a*cursor").status_code == 400


def test_the_monitor_pages_by_fifty(django_user_model, alice, monkeypatch):
    from agentchat.dashboard import direct

    monkeypatch.setattr(direct, "MONITOR_PAGE", 2)
    boss = django_user_model.objects.create_user("boss", password="pw-boss-123", is_staff=True)
    client = PagesClient()
    client.force_login(boss)
    agent_get_or_create(name="bob")
    for n in range(3):
        services.envelope_send(sender=alice, to="bob", text=f"n{n}")
    html = client.get("/monitor/").content.decode()
    assert _ids(html, r'<tr id="d-([a-z]+-\d+)"') == ["bob-0", "bob-1"]
    assert "Next deliveries" in html
    nxt = re.search(r'id="monitor-next" href="\?cursor=([^"]+)"', html)[1]
    assert _ids(
        client.get(f"/monitor/?cursor={nxt}").content.decode(), r'<tr id="d-([a-z]+-\d+)"'
    ) == ["bob-2"]
