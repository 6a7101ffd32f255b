"""Approvals (human in the loop): a needs-approval request is pending until an answer
(a reply with status approved or rejected) exists — the maintainer's, when the channel names
one. The API lists them; the dashboard answers them."""

from __future__ import annotations

import pytest

from agentchat.core.identity.humans import human_agent
from agentchat.core.models import Agent
from channels_app import services
from channels_app.models import Channel
from tests.conftest import PagesClient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("ops_channel")]  # alice's channel ops


def ask(client, title="Deploy to prod?", channel="ops") -> int:
    r = client.post(
        f"/api/v1/channels/{channel}/messages/",
        {"title": title, "status": "needs-approval", "body": "**risky**"},
        format="json",
    )
    assert r.status_code == 201, r.content
    return r.json()["seq"]


def pending(client) -> list[tuple[str, int]]:
    body = client.get("/api/v1/approvals/").json()
    return [(a["request"]["channel"], a["request"]["seq"]) for a in body["approvals"]]


def answer(channel: str, seq: int, sender: str, status: str) -> None:
    """An answer from a person (a human agent, as the dashboard posts it)."""
    Agent.objects.update_or_create(name=sender, defaults={"kind": Agent.Kind.HUMAN})
    services.message_post(
        channel=Channel.objects.get(name=channel),
        sender=sender,
        title="answer",
        reply_to=seq,
        status=status,
    )


def test_a_request_is_pending_until_answered(alice, api_for):
    seq = ask(alice)
    other = ask(alice, "Rotate keys?")
    services.message_post(
        channel=Channel.objects.get(name="ops"), sender="bob", title="hmm", reply_to=seq
    )  # a comment is no answer
    assert pending(api_for("bob")) == [("ops", seq), ("ops", other)]
    answer("ops", seq, "bob", "approved")
    assert pending(alice) == [("ops", other)]
    answer("ops", other, "carol", "rejected")
    assert pending(alice) == []


def test_with_a_maintainer_only_the_maintainers_answer_counts(alice, api_for):
    Channel.objects.filter(name="ops").update(maintainer="mia")
    seq = ask(alice)
    answer("ops", seq, "bob", "approved")
    listed = alice.get("/api/v1/approvals/").json()["approvals"]
    assert [(a["request"]["seq"], a["maintainer"]) for a in listed] == [(seq, "mia")]
    answer("ops", seq, "mia", "rejected")
    assert pending(alice) == []


def test_a_members_only_channels_requests_are_invisible_to_others(alice, api_for):
    Agent.objects.get_or_create(name="carol")
    carol = api_for("carol")
    carol.post(
        "/api/v1/channels/",
        {"name": "secret", "members": ["carol"], "visibility": "members"},
        format="json",
    )
    hidden = ask(carol, channel="secret")
    assert pending(carol) == [("secret", hidden)]
    assert pending(alice) == []


@pytest.mark.parametrize("limit", ["0", "1001", "x", "-1", "٣"])
def test_a_bad_limit_is_a_400(alice, limit):
    r = alice.get("/api/v1/approvals/", {"limit": limit})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "INVALID_VALUE"


def test_the_limit_cuts_and_says_more(alice):
    for n in range(3):
        ask(alice, f"q{n}")
    body = alice.get("/api/v1/approvals/", {"limit": "2"}).json()
    assert (len(body["approvals"]), body["more"]) == (2, True)


@pytest.fixture
def browser(django_user_model):
    user = django_user_model.objects.create_user("ann", password="pw")
    client = PagesClient(enforce_csrf_checks=True)
    client.force_login(user)
    client.agent = human_agent(user)
    return client


def test_the_page_answers_as_me_and_the_request_leaves_the_list(alice, browser):
    seq = ask(alice)
    page = browser.get("/approvals/").content.decode()
    assert f'id="approval-ops-{seq}"' in page and "<strong>risky</strong>" in page
    assert '<span class="badge">1</span>' in page  # the navigation's count
    token = browser.cookies["csrftoken"].value
    assert browser.post(f"/approvals/ops/{seq}/", {"decision": "approved"}).status_code == 403
    for bad in ({"decision": "maybe"}, {"decision": ""}):
        r = browser.post(f"/approvals/ops/{seq}/", {**bad, "csrfmiddlewaretoken": token})
        assert r.status_code == 400
    assert browser.post("/approvals/ops/99/", {"decision": "approved",
                        "csrfmiddlewaretoken": token}).status_code == 400  # fmt: skip
    r = browser.post(
        f"/approvals/ops/{seq}/",
        {"decision": "approved", "comment": "go ahead", "csrfmiddlewaretoken": token},
    )
    assert r.status_code == 302
    reply = Channel.objects.get(name="ops").messages.order_by("-seq").first()
    assert (reply.sender, reply.sender_kind, reply.reply_to, reply.status, reply.to) == (
        browser.agent.name,
        "human",
        seq,
        "approved",
        ["alice"],
    )
    assert (reply.title, reply.body) == ("Approved: Deploy to prod?", "go ahead")
    assert f'id="approval-ops-{seq}"' not in browser.get("/approvals/").content.decode()


def test_the_channel_page_points_a_pending_request_to_its_answer(alice, browser):
    seq = ask(alice)
    other = ask(alice, "Rotate keys?")
    link = 'href="/approvals/?channel=ops#approval-ops-{}">Awaiting approval'
    page = browser.get("/c/ops/").content.decode()
    assert link.format(seq) in page and link.format(other) in page
    answer("ops", seq, "bob", "approved")
    page = browser.get("/c/ops/").content.decode()
    assert link.format(seq) not in page and link.format(other) in page
    # The live fragment says the same, in one query for the page's requests.
    fragment = browser.get("/c/ops/fragment/", {"after": "0"}).content.decode()
    assert link.format(seq) not in fragment and link.format(other) in fragment


def test_the_approvals_page_of_one_channel(alice, api_for, browser):
    seq = ask(alice)
    api_for("bob").post("/api/v1/channels/", {"name": "dev"}, format="json")
    other = ask(api_for("bob"), "Merge?", channel="dev")
    page = browser.get("/approvals/", {"channel": "ops"}).content.decode()
    assert f'id="approval-ops-{seq}"' in page and f'id="approval-dev-{other}"' not in page
    assert "Pending approvals in ops" in page
    for hidden in ("nope", "", "ops%0A", "%ED%A0%80", "o%00ps"):  # %ED%A0%80: a lone surrogate
        assert browser.get(f"/approvals/?channel={hidden}").status_code == 404
