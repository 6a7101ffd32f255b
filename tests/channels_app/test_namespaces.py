"""Dot namespaces (IASP §2): ``alice.critic`` is a sub-agent of ``alice``. A message to
``alice.critic`` is relevant to it and its ancestors, not its siblings; one to ``alice`` is not
relevant to ``alice.critic``; the rule is one function (``agentchat.relevance``)
applied by read, read_signals, the wait's rings and the client's websocket wait. A parent's
token acts as any of its sub-agents (``AgentChat-As``), a sub-agent's never as its parent."""

from __future__ import annotations

import asyncio
import threading

import httpx
import pytest

from agentchat.asgi import application
from agentchat.client import ops
from agentchat.client.api import Client
from agentchat.core.identity import registry as identity_registry
from agentchat.core.identity import services as identity_services
from agentchat.core.models import Agent
from agentchat.relevance import is_relevant
from channels_app.models import Channel, Message
from channels_app.selectors import message_relevant_filter
from channels_app.services import channel_create, message_post
from tests.errors import error_code
from tests.signals import layer_kind, until  # noqa: F401  (fixture)

BASE = "/api/v1/channels/session"
NAMES = [
    "alice",
    "alice.critic",
    "alice.popper",
    "alice.popper.critic",
    "alicex",
    "bob",
    "a_b",
    "a.b",
]


def as_(client, name):
    """The same token, acting as ``name``."""
    client.credentials(**{**client._credentials, "HTTP_AGENTCHAT_AS": name})
    return client


# --- the rule -----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_sql_filter_is_the_rule_exactly():
    channel = channel_create(name="session", created_by="alice")
    cases = [
        (sender, to)
        for sender in NAMES
        for to in [[], *([name] for name in NAMES), ["bob", "alice.popper.critic"]]
    ]
    for n, (sender, to) in enumerate(cases):
        message_post(channel=channel, sender=sender, title=f"m{n}", to=to)
    rows = list(Message.objects.filter(channel=channel))
    for name in NAMES:
        expected = {m.seq for m in rows if is_relevant(sender=m.sender, to=m.to, name=name)}
        found = set(
            Message.objects.filter(channel=channel)
            .filter(message_relevant_filter(name))
            .values_list("seq", flat=True)
        )
        assert found == expected, name
        assert {m.seq for m in rows if m.is_relevant_to(name)} == expected


# --- acting as a sub-agent --------------------------------------------------------------------


@pytest.fixture
def session(db, alice, bob):
    assert alice.post("/api/v1/channels/", {"name": "session"}, format="json").status_code == 201
    return alice, bob


def test_a_parents_token_acts_as_its_sub_agents(session, api_for):
    alice, _bob = session
    critic = as_(api_for("alice"), "alice.critic")
    assert critic.get("/api/v1/me/").json()["name"] == "alice.critic"
    sub = Agent.objects.get(name="alice.critic")
    assert sub.kind == Agent.Kind.AGENT
    assert not sub.tokens.exists()  # it needs none
    r = critic.post(f"{BASE}/messages/", {"title": "from the critic"}, format="json")
    assert r.json()["from"] == "alice.critic"
    deep = as_(api_for("alice"), "alice.critic.x")
    assert deep.get("/api/v1/me/").json()["name"] == "alice.critic.x"
    # `from` names the acting agent, not the token's.
    r = critic.post(f"{BASE}/messages/", {"title": "t", "from": "alice"}, format="json")
    assert error_code(r) == "SENDER_MISMATCH"
    # Its own cursor: the critic's read does not move alice's.
    critic.post(f"{BASE}/read/")
    assert alice.get(f"{BASE}/").json()["cursor"] == 0


@pytest.mark.parametrize(
    ("token_of", "acting", "code"),
    [
        ("alice.critic", "alice", "ACTING_AS_FORBIDDEN"),  # a sub-agent as its parent
        ("alice.critic", "alice.popper", "ACTING_AS_FORBIDDEN"),  # as a sibling
        ("alice", "alicex", "ACTING_AS_FORBIDDEN"),
        ("alice", "bob", "ACTING_AS_FORBIDDEN"),
        ("alice", "alice.", "INVALID_NAME"),
        ("alice", "alice..critic", "INVALID_NAME"),  # an empty segment (issue 17)
        ("alice", "alice.critic..x", "INVALID_NAME"),
        ("alice", "Alice.critic", "INVALID_NAME"),
        ("alice", "", "INVALID_NAME"),
        ("alice", "alice." + "x" * 60, "INVALID_NAME"),
        ("alice", "alice.critic,alice.popper", "INVALID_NAME"),
    ],
)
def test_a_token_may_not_act_as_anyone_else(session, api_for, token_of, acting, code):
    client = as_(api_for(token_of), acting)
    for r in (
        client.get("/api/v1/me/"),
        client.post(f"{BASE}/messages/", {"title": "t"}, format="json"),
        client.get(f"{BASE}/signals/"),
    ):
        assert error_code(r) == code
    assert not Message.objects.exists()
    assert not Agent.objects.filter(name=acting).exists() or acting in ("alice", "bob")


def test_an_agent_has_a_bounded_number_of_sub_agents(session, api_for, monkeypatch):
    monkeypatch.setattr(identity_registry, "SUBAGENTS_MAX", 2)
    for name in ("alice.a", "alice.b"):
        assert as_(api_for("alice"), name).get("/api/v1/me/").json()["name"] == name
    r = as_(api_for("alice"), "alice.c").get("/api/v1/me/")
    assert error_code(r) == "SUBAGENTS_TOO_MANY"
    assert not Agent.objects.filter(name="alice.c").exists()
    # The existing ones still act; another agent's count is its own.
    assert as_(api_for("alice"), "alice.a").get("/api/v1/me/").status_code == 200
    assert as_(api_for("bob"), "bob.a").get("/api/v1/me/").status_code == 200


def test_a_sub_agent_sees_a_members_only_channel_when_it_is_a_member(session, api_for):
    alice, _ = session
    body = {"name": "private", "members": ["alice", "alice.critic"], "visibility": "members"}
    assert alice.post("/api/v1/channels/", body, format="json").status_code == 201
    assert as_(api_for("alice"), "alice.critic").get("/api/v1/channels/private/").status_code == 200
    # Rosters name agents exactly: the parent's membership is not its sub-agents'.
    r = as_(api_for("alice"), "alice.popper").get("/api/v1/channels/private/")
    assert error_code(r) == "CHANNEL_NOT_FOUND"


@pytest.mark.django_db(transaction=True)
def test_several_acting_headers_are_refused(make_agent):
    _, token = make_agent("alice")

    async def scenario():
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
            headers = [
                ("Authorization", f"Bearer {token}"),
                ("AgentChat-As", "alice.a"),
                ("AgentChat-As", "alice.b"),
            ]
            return await http.get("/api/v1/me/", headers=headers)

    r = asyncio.run(scenario())
    assert error_code(r) == "INVALID_VALUE"


# --- relevance in read and read_signals -------------------------------------------------------


def test_read_follows_the_namespaces(session, api_for):
    alice, bob = session
    critic = as_(api_for("alice"), "alice.critic")
    popper = as_(api_for("alice"), "alice.popper")
    for to in ("alice.critic", "alice", "alice.popper.critic", "alicex"):
        bob.post(f"{BASE}/messages/", {"title": f"to {to}", "to": to}, format="json")

    def titles(client):
        return [m["title"] for m in client.post(f"{BASE}/read/").json()["messages"]]

    assert titles(alice) == ["to alice.critic", "to alice", "to alice.popper.critic"]
    assert titles(critic) == ["to alice.critic"]
    assert titles(popper) == ["to alice.popper.critic"]


def test_read_signals_follows_the_namespaces_and_acks_are_per_agent(session, api_for):
    alice, bob = session
    critic = as_(api_for("alice"), "alice.critic")
    popper = as_(api_for("alice"), "alice.popper")

    def send(to):
        body = {"to": to, "content": f"to {to}"}
        return bob.post(f"{BASE}/signals/", body, format="json").json()["id"]

    to_critic, to_alice, to_all = send("alice.critic"), send("alice"), send("*")

    def unread(client):
        return [s["id"] for s in client.get(f"{BASE}/signals/").json()["signals"]]

    assert unread(alice) == [to_critic, to_alice, to_all]
    assert unread(critic) == [to_critic, to_all]
    assert unread(popper) == [to_all]
    # The parent acknowledges its sub-agent's signal for itself only.
    r = alice.post(f"{BASE}/signals/ack/", {"ids": [to_critic]}, format="json")
    assert r.json() == {"acked": [to_critic], "already_read": []}
    assert unread(alice) == [to_alice, to_all]
    assert unread(critic) == [to_critic, to_all]
    # A sub-agent may not acknowledge what is addressed to its parent, nor a sibling.
    r = critic.post(f"{BASE}/signals/ack/", {"ids": [to_alice]}, format="json")
    assert error_code(r) == "SIGNAL_NOT_ADDRESSED"
    r = popper.post(f"{BASE}/signals/ack/", {"ids": [to_critic]}, format="json")
    assert error_code(r) == "SIGNAL_NOT_ADDRESSED"


# --- the wait's rings (in process) --------------------------------------------------------------


@pytest.fixture
def tokens(transactional_db, make_agent):
    channel_create(name="session", created_by="bob")
    return {name: make_agent(name)[1] for name in ("alice", "bob")}


def http_client(token: str, acting: str | None = None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {token}"}
    if acting:
        headers["AgentChat-As"] = acting
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=application),
        base_url=f"http://testserver{BASE}/",
        headers=headers,
        timeout=30,
    )


@pytest.mark.usefixtures("layer_kind")
def test_a_wait_is_woken_by_a_sub_agents_message_not_a_siblings(tokens, counted_reads):
    async def post(to: str) -> None:
        async with http_client(tokens["bob"]) as http:
            r = await http.post("messages/", json={"title": f"to {to}", "to": to})
            assert r.status_code == 201, r.text

    async def scenario():
        async with (
            http_client(tokens["alice"]) as parent,
            http_client(tokens["alice"], "alice.critic") as critic,
        ):
            parent_wait = asyncio.create_task(parent.get("wait/", params={"timeout": 20}))
            critic_wait = asyncio.create_task(critic.get("wait/", params={"timeout": 20}))
            await until(lambda: len(counted_reads.names) >= 2, what="both waits' first reads")
            await post("alice.popper")  # relevant to alice, not to alice.critic
            parent_answer = await asyncio.wait_for(parent_wait, 10)
            assert not critic_wait.done()
            await post("alice")  # not relevant to alice.critic either
            await post("alice.critic")
            return parent_answer, await asyncio.wait_for(critic_wait, 10)

    parent_answer, critic_answer = asyncio.run(scenario())
    assert [m["title"] for m in parent_answer.json()["messages"]] == ["to alice.popper"]
    assert [m["title"] for m in critic_answer.json()["messages"]] == ["to alice.critic"]
    assert sorted(counted_reads.names) == ["alice", "alice.critic"]  # woken by rings only


# --- the client's wait on a real websocket ------------------------------------------------------


def test_the_clients_websocket_wait_follows_the_namespaces(live, make_agent, monkeypatch):
    _, alice_token = make_agent("alice")
    _, bob_token = make_agent("bob")
    Channel.objects.create(name="session", created_by="bob")
    subscribed = threading.Event()
    real_trace = ops.trace
    monkeypatch.setattr(
        ops,
        "trace",
        lambda line: (real_trace(line), line.startswith("subscribed") and subscribed.set()),
    )
    results: dict[str, list[str]] = {}

    def wait(name: str, acting: str | None) -> None:
        with Client(live.url, alice_token, acting=acting) as client:
            found, _, _ = ops.wait_found(client, "session", name, timeout=20)
            results[name] = [m["title"] for m in found]

    critic = threading.Thread(target=wait, args=("alice.critic", "alice.critic"))
    critic.start()
    assert subscribed.wait(20), "the critic's wait did not subscribe"
    with Client(live.url, bob_token) as bob:
        for to in ("alice.popper", "alice", "alice.critic"):
            bob.request("POST", "channels/session/messages/", json={"title": f"to {to}", "to": to})
    critic.join(20)
    assert results["alice.critic"] == ["to alice.critic"]
    subscribed.clear()
    parent = threading.Thread(target=wait, args=("alice", None))
    parent.start()
    parent.join(20)  # its cursor is at 0: the three are there, all relevant to alice
    assert results["alice"] == ["to alice.popper", "to alice", "to alice.critic"]


@pytest.mark.django_db
def test_no_token_acts_as_a_person_through_the_header(session, api_for):
    # A person signed in as `carol` beside an agent `carol` is `carol.human`, under the agent's
    # name (the hostile run): the agent's token acting as it would answer approvals as a person.
    Agent.objects.create(name="carol.human", kind=Agent.Kind.HUMAN)
    carol = as_(api_for("carol"), "carol.human")
    for r in (
        carol.get("/api/v1/me/"),
        carol.post(f"{BASE}/messages/", {"title": "t", "status": "approved"}, format="json"),
    ):
        assert error_code(r) == "ACTING_AS_FORBIDDEN"
    assert not Message.objects.filter(sender="carol.human").exists()


@pytest.mark.django_db
def test_a_persons_sub_agents_are_agents(session, make_agent):
    # A person's token acting as `pat.bot` must not make a second person who could decide
    # pat's own approval requests.
    pat = Agent.objects.create(name="pat", kind=Agent.Kind.HUMAN)
    assert identity_services.agent_acting(pat, "pat.bot").kind == Agent.Kind.AGENT
