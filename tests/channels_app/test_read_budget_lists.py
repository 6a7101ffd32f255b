"""Search and the pending approvals answer at most about AGENTCHAT_READ_MAX_BYTES of JSON (at
least one item) and say ``more`` when the budget cut them, as the API and the dashboard pages
read them; the page is planned from ``Message.json_size``, so no more bodies are loaded than
sent."""

from __future__ import annotations

import pytest

from agentchat.core.identity.humans import human_agent
from channels_app import approvals, search, services
from channels_app.models import Channel, Message
from tests.conftest import PagesClient

pytestmark = pytest.mark.django_db

BODY = "lorem " * 5000  # 30 KB a message


@pytest.fixture
def ops(alice):
    assert alice.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    channel = Channel.objects.get(name="ops")
    for n in range(10):
        services.message_post(channel=channel, sender="alice", title=f"m{n}", body=BODY)
        services.message_post(
            channel=channel, sender="alice", title=f"ask{n}", body=BODY, status="needs-approval"
        )
    return alice


@pytest.fixture
def browser(django_user_model):
    user = django_user_model.objects.create_user("ann", password="pw")
    client = PagesClient()
    client.force_login(user)
    client.agent = human_agent(user)
    return client


def test_search_stops_at_the_byte_budget(ops, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 100_000
    r = ops.get("/api/v1/search/", {"q": "lorem", "limit": "200"})
    body = r.json()
    assert len(r.content) <= 100_000
    assert len(body["results"]) == 3 and body["more"] is True  # 20 matched, 3 of 30 KB fit
    everything = ops.get("/api/v1/search/", {"q": "lorem", "limit": "3"}).json()
    assert [m["seq"] for m in body["results"]] == [m["seq"] for m in everything["results"]]


def test_approvals_stop_at_the_byte_budget(ops, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 100_000
    r = ops.get("/api/v1/approvals/", {"limit": "1000"})
    body = r.json()
    assert len(r.content) <= 100_000
    assert len(body["approvals"]) == 3 and body["more"] is True
    assert [a["request"]["title"] for a in body["approvals"]] == ["ask0", "ask1", "ask2"]


def test_one_item_over_the_budget_is_still_answered(ops, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 10
    found = ops.get("/api/v1/search/", {"q": "lorem"}).json()
    assert len(found["results"]) == 1 and found["more"] is True
    pending = ops.get("/api/v1/approvals/").json()
    assert len(pending["approvals"]) == 1 and pending["more"] is True


def test_within_the_budget_nothing_is_cut(ops):
    found = ops.get("/api/v1/search/", {"q": "lorem", "limit": "200"}).json()
    assert len(found["results"]) == 20 and found["more"] is False
    pending = ops.get("/api/v1/approvals/").json()
    assert len(pending["approvals"]) == 10 and pending["more"] is False


def test_the_plan_loads_only_the_bodies_it_sends(ops, settings, monkeypatch):
    settings.AGENTCHAT_READ_MAX_BYTES = 100_000
    loaded: list[str] = []
    real_init = Message.__init__

    def counting_init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        if self.body:
            loaded.append(self.title)

    monkeypatch.setattr(Message, "__init__", counting_init)
    found, more = search.messages_search(viewer="alice", query="lorem", limit=200)
    assert len(found) == 3 and more and len(loaded) == 3  # bodies loaded: the ones sent
    loaded.clear()
    pending, more = approvals.approvals_pending(viewer="alice")
    assert len(pending) == 3 and more and len(loaded) == 3


def test_the_dashboard_pages_keep_the_budget(ops, browser, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 100_000
    page = browser.get("/search/", {"q": "lorem"}).content.decode()
    assert page.count('id="r-ops-') == 3 and "More matched" in page
    page = browser.get("/approvals/").content.decode()
    assert page.count('id="approval-ops-') == 3 and "More are waiting" in page
