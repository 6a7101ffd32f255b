"""The pending approvals page on with a cursor: ``more`` and ``next`` from the API (``after``
given back), ``Next requests`` on the dashboard, so every pending request is reachable
within the read's byte budget however big the bodies ahead of it."""

from __future__ import annotations

import html
import re

import pytest

from agentchat.core.identity.humans import human_agent
from channels_app import services
from channels_app.models import Channel
from tests.conftest import PagesClient

pytestmark = pytest.mark.django_db

BIG = "x" * 400_000


@pytest.fixture
def ops(alice):
    assert alice.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    channel = Channel.objects.get(name="ops")
    for n in range(3):
        services.message_post(
            channel=channel, sender="alice", title=f"big{n}", body=BIG, status="needs-approval"
        )
    for n in range(3):
        services.message_post(
            channel=channel, sender="alice", title=f"small{n}", body="hi", status="needs-approval"
        )
    return alice


def test_the_api_pages_through_every_pending_request(ops, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 1_000_000
    titles: list[str] = []
    query: dict[str, str] = {}
    for _ in range(10):
        r = ops.get("/api/v1/approvals/", query)
        assert r.status_code == 200 and len(r.content) <= 1_000_000
        body = r.json()
        titles += [a["request"]["title"] for a in body["approvals"]]
        if not body["more"]:
            assert "next" not in body
            break
        query = {"after": body["next"]}
    assert titles == ["big0", "big1", "big2", "small0", "small1", "small2"]


def test_limit_pages_and_the_cursor_is_exclusive(ops, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 10_000_000
    first = ops.get("/api/v1/approvals/", {"limit": "4"}).json()
    assert [a["request"]["title"] for a in first["approvals"]][-1] == "small0"
    assert first["more"] is True
    rest = ops.get("/api/v1/approvals/", {"limit": "4", "after": first["next"]}).json()
    assert [a["request"]["title"] for a in rest["approvals"]] == ["small1", "small2"]
    assert rest["more"] is False and "next" not in rest


@pytest.mark.parametrize(
    "after", ["x", "1~", "~a", "12~a b", "9" * 18 + "~a", "-" + "9" * 18 + "~a", "1~a\n"]
)
def test_a_malformed_cursor_is_refused(ops, after):
    r = ops.get("/api/v1/approvals/", {"after": after})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "INVALID_VALUE"


def test_the_dashboard_links_to_the_next_requests(ops, settings, django_user_model):
    settings.AGENTCHAT_READ_MAX_BYTES = 1_000_000
    user = django_user_model.objects.create_user("ann", password="pw")
    client = PagesClient()
    client.force_login(user)
    human_agent(user)
    seen: list[str] = []
    url = "/approvals/"
    for _ in range(10):
        page = client.get(url).content.decode()
        seen += re.findall(r'id="approval-(ops-[0-9]+)"', page)
        link = re.search(r'<a href="([^"]*)">Next requests</a>', page)
        if link is None:
            break
        url = "/approvals/" + html.unescape(link[1])
    assert len(seen) == 6 and len(set(seen)) == 6
    r = client.get("/approvals/", {"after": "nonsense"})
    assert r.status_code == 400
