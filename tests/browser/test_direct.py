"""Direct messages (HTTP v1 envelopes) on the dashboard in real headless browsers against a real
server process (the ``browser`` fixture of ``test_dashboard``: Chromium and Firefox): an agent's
envelope arrives live on the open conversation page, in its conversation's section (a new
conversation makes a new section); a message sent from the form reaches the agent's inbox; the
agent's receipt shows on that message live; a refused send says why. Screenshots at desktop and
phone width land in the data folder's ``screenshots/`` (``<browser>-direct-…``)."""

from __future__ import annotations

import httpx
import pytest

from agentchat.core.identity.humans import human_agent
from agentchat.core.identity.services import agent_get_or_create, token_create
from tests.browser import test_dashboard
from tests.browser.test_dashboard import ARRIVAL_MS, _shots
from tests.conftest import auth

browser = test_dashboard.browser  # the fixture: Chromium and Firefox


@pytest.fixture
def pair(live, django_user_model):
    ann = django_user_model.objects.create_user("ann", password="a-long-password", is_staff=True)
    me = human_agent(ann)
    alice = agent_get_or_create(name="alice")
    return live, token_create(agent=alice), me.name


def _send(live, token: str, **body: object) -> dict:
    r = httpx.post(f"{live.url}/v1/agents/alice/messages", json=body, headers=auth(token))
    assert r.status_code == 201, r.text
    return r.json()


def _seq_of(page, text: str) -> int:
    item = page.locator("li.message", has_text=text)
    return int(item.get_attribute("data-seq"))


def test_a_direct_message_arrives_live_a_reply_is_sent_and_its_receipt_shows(browser, pair):
    live, token, me = pair
    _send(live, token, to=me, conversation_id="task-42", text="Please inspect **this**",
          data={"priority": 2}, correlation_id="request-7")  # fmt: skip
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.goto(f"{live.url}/dm/alice/")
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", "a-long-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live.url}/dm/alice/")
    page.wait_for_function("() => window.__socketOpen === true", timeout=5000)
    assert page.locator("section.conversation").count() == 1

    # Live: into its conversation's section, then a new conversation's section.
    _send(live, token, to=me, conversation_id="task-42", text="arrives *live*")
    page.wait_for_selector(
        "section[data-conversation='task-42'] li.message .body em", timeout=ARRIVAL_MS
    )
    _send(live, token, to=me, conversation_id="task-43", text="a second thread")
    page.wait_for_selector("section[data-conversation='task-43'] li.message", timeout=ARRIVAL_MS)
    assert page.locator("#unread-count").inner_text() == "3 unread"

    # Send from the form, into task-42.
    page.fill(".direct-form input[name=conversation_id]", "task-42")
    page.fill(".direct-form textarea[name=text]", "On it, will report back")
    page.click(".direct-form button[type=submit]")
    page.wait_for_selector("li.message:has-text('On it, will report back')")
    mine = _seq_of(page, "On it, will report back")
    assert page.url == f"{live.url}/dm/alice/#m-{mine}"
    inbox = httpx.get(f"{live.url}/v1/agents/alice/inbox", headers=auth(token)).json()
    (delivery,) = inbox["deliveries"]
    envelope = delivery["envelope"]
    assert (envelope["from"], envelope["conversation_id"]) == (me, "task-42")
    assert envelope["message"]["text"] == "On it, will report back"
    page.wait_for_function("() => window.__socketOpen === true", timeout=5000)

    # alice's receipt shows on that message, live.
    r = httpx.post(
        f"{live.url}/v1/agents/alice/receipts",
        json={"message_id": envelope["id"], "status": "processed", "detail": "Result attached"},
        headers=auth(token),
    )
    assert r.status_code == 201, r.text
    receipt = page.locator(f"#m-{mine} ul.receipts li.receipt-processed")
    receipt.wait_for(timeout=ARRIVAL_MS)
    assert "processed by alice" in receipt.inner_text()
    assert "Result attached" in receipt.inner_text()
    assert receipt.locator("time").get_attribute("datetime")
    page.evaluate("() => window.scrollTo(0, 0)")
    _shots(page, "direct")

    # A refused send says why and keeps what was typed.
    page.fill(".direct-form textarea[name=text]", "with bad data")
    page.click(".direct-form summary")
    page.fill(".direct-form textarea[name=data]", "{not json")
    page.click(".direct-form button[type=submit]")
    page.wait_for_selector("#send-error")
    assert "INVALID_JSON" in page.locator("#send-error").inner_text()
    assert page.locator(".direct-form textarea[name=text]").input_value() == "with bad data"

    page.click("header nav >> text=Direct")
    page.wait_for_selector("#peer-alice")
    _shots(page, "direct-list")
    page.click("header nav >> text=Monitor")
    page.wait_for_selector("table.monitor")
    assert (
        page.locator("table.monitor tbody tr").count() == 5
    )  # 3 messages and a receipt to ann, 1 to alice
    _shots(page, "monitor")
