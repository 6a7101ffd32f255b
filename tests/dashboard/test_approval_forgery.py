"""Approvals that can't be forged: an answer decides a request only when a person (the server's
``sender_kind`` human) other than the requester sent it, and the channel's maintainer when it
names one. Every other answer is a comment: the API's list keeps the request pending and the
dashboard shows the answer as a comment. Each forgery goes through the real API or pages."""

from __future__ import annotations

import pytest
from django.test import Client

from agentchat.core.identity.humans import human_agent
from channels_app.models import Channel, Message
from tests.conftest import PagesClient

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("ops_channel")]  # alice's channel ops

COMMENT = "comment (approved, does not decide)"
AWAITING = 'href="/approvals/?channel=ops#approval-ops-{}">Awaiting approval'


def post(client, **fields) -> int:
    r = client.post("/api/v1/channels/ops/messages/", {"title": "t", **fields}, format="json")
    assert r.status_code == 201, r.content
    return r.json()["seq"]


def pending(client) -> list[int]:
    return [a["request"]["seq"] for a in client.get("/api/v1/approvals/").json()["approvals"]]


def person(django_user_model, name: str) -> Client:
    client = PagesClient(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create_user(name, password="pw"))
    client.agent = human_agent(django_user_model.objects.get(username=name))
    client.token = client.get("/").cookies["csrftoken"].value
    return client


def answer_on_page(client: Client, seq: int, decision: str = "approved") -> None:
    r = client.post(
        f"/approvals/ops/{seq}/", {"decision": decision, "csrfmiddlewaretoken": client.token}
    )
    assert r.status_code == 302, r.content


def test_an_agent_approving_its_own_request_is_a_comment(alice, django_user_model):
    seq = post(alice, status="needs-approval")
    answer = post(alice, status="approved", reply_to=seq)
    assert pending(alice) == [seq]
    ann = person(django_user_model, "ann")
    page = ann.get("/c/ops/").content.decode()
    assert AWAITING.format(seq) in page
    item = page.split(f'id="m-{answer}"')[1].split("</li>")[0]
    assert COMMENT in item and "answer-decision" not in item
    assert f'id="approval-ops-{seq}"' in ann.get("/approvals/").content.decode()
    assert '<span class="badge">1</span>' in ann.get("/approvals/").content.decode()


def test_another_agents_answer_is_a_comment(alice, api_for):
    seq = post(alice, status="needs-approval")
    post(api_for("bob"), status="approved", reply_to=seq)
    post(api_for("carol"), status="rejected", reply_to=seq)
    assert pending(alice) == [seq]


def test_a_person_who_is_not_the_maintainer_only_comments(alice, django_user_model):
    Channel.objects.filter(name="ops").update(maintainer="mia")
    seq = post(alice, status="needs-approval")
    ann = person(django_user_model, "ann")
    assert "yours is a comment" in ann.get("/approvals/").content.decode()
    answer_on_page(ann, seq)
    assert pending(alice) == [seq]
    page = ann.get("/c/ops/").content.decode()
    assert COMMENT in page and AWAITING.format(seq) in page
    mia = person(django_user_model, "mia")
    answer_on_page(mia, seq, "rejected")
    assert pending(alice) == []
    page = mia.get("/c/ops/").content.decode()
    assert '<span class="status answer-decision">rejected</span>' in page


def test_a_person_approving_their_own_request_on_the_dashboard_is_a_comment(
    alice, django_user_model
):
    ann = person(django_user_model, "ann")
    r = ann.post(
        "/c/ops/post/",
        {"title": "may I?", "status": "needs-approval", "csrfmiddlewaretoken": ann.token},
    )
    assert r.status_code == 302
    seq = Message.objects.get(title="may I?").seq
    assert "You asked: your answer is a comment" in ann.get("/approvals/").content.decode()
    answer_on_page(ann, seq)
    assert pending(alice) == [seq]
    assert f'id="approval-ops-{seq}"' in ann.get("/approvals/").content.decode()
    bo = person(django_user_model, "bo")  # another person decides
    answer_on_page(bo, seq)
    assert pending(alice) == []


def test_the_partial_index_is_the_rules_condition():
    from channels_app.approval_rule import ANSWER_CONDITION

    index = next(i for i in Message._meta.indexes if i.name == "message_approval_deciders")
    assert index.condition == ANSWER_CONDITION


def test_a_person_never_decides_its_own_sub_agents_request(alice, api_for, django_user_model):
    """A request posted as ``humx.bot`` (humx's token through AgentChat-As) is humx's: its
    answers, on the dashboard or through the API, and its sub-agents' are comments."""
    from agentchat.core.identity.services import token_create
    from tests.asgi_client import AsgiApiClient

    humx = person(django_user_model, "humx")
    token = token_create(agent=humx.agent)

    def as_(acting: str | None) -> AsgiApiClient:
        api = AsgiApiClient()
        extra = {"HTTP_AGENTCHAT_AS": acting} if acting else {}
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}", **extra)
        return api

    seq = post(as_("humx.bot"), status="needs-approval")
    assert Message.objects.get(seq=seq).sender == "humx.bot"
    assert "You asked: your answer is a comment" in humx.get("/approvals/").content.decode()
    answer_on_page(humx, seq)  # the dashboard's approve action
    assert pending(alice) == [seq]
    post(as_(None), status="approved", reply_to=seq)  # the API, as humx itself
    assert pending(alice) == [seq]
    page = humx.get("/c/ops/").content.decode()
    assert COMMENT in page and AWAITING.format(seq) in page
    # the other way round: humx's own request is not decided by its sub-agent either
    mine = post(as_(None), status="needs-approval")
    post(as_("humx.bot"), status="approved", reply_to=mine)
    assert pending(alice) == [seq, mine]
    # a look-alike name is another person, who decides
    answer_on_page(person(django_user_model, "humx-2"), seq)
    assert pending(alice) == [mine]
