"""The loop guard through a real server process: two scripted agents ping-ponging are stopped,
a human's post lets them go on, and (PostgreSQL) many agents posting at once cross the
threshold exactly once."""

from __future__ import annotations

import httpx
import pytest
from django.db import connection

from agentchat.core.identity.services import agent_get_or_create, token_create
from agentchat.core.models import Agent
from channels_app.models import Message
from tests.channels_app.test_agents_live import together
from tests.conftest import ServerProcess, auth

N = 8
GUARD_ENV = {
    "AGENTCHAT_LOOP_GUARD_MESSAGES": str(N),
    "AGENTCHAT_LOOP_GUARD_SECONDS": "120",
    "AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS": "900",
    "AGENTCHAT_LOOP_GUARD_REFUSE": "1",
    "AGENTCHAT_POST_RATE": "",
}


@pytest.fixture
def guarded(transactional_db):
    server = ServerProcess(env=GUARD_ENV)
    yield server
    server.stop()


class ScriptedAgent:
    """An agent that answers every message addressed to it, as an echo-storm loop does: it
    reads its inbox and replies to the sender."""

    def __init__(self, base: str, token: str, name: str, peer: str) -> None:
        self.http = httpx.Client(base_url=base, headers=auth(token), timeout=30)
        self.name, self.peer = name, peer

    def answer(self, turn: int) -> httpx.Response:
        read = self.http.post("/api/v1/channels/loop/read/", json={})
        assert read.status_code == 200, read.text
        return self.http.post(
            "/api/v1/channels/loop/messages/",
            json={"title": f"{self.name} turn {turn}", "to": [self.peer]},
        )


def test_two_agents_ping_ponging_are_stopped_until_a_human_posts(guarded):
    tokens = {name: token_create(agent=agent_get_or_create(name=name)) for name in ("ann", "ben")}
    person = token_create(agent=agent_get_or_create(name="pat", kind=Agent.Kind.HUMAN))
    r = httpx.post(f"{guarded.url}/api/v1/channels/", json={"name": "loop"}, headers=auth(person))
    assert r.status_code == 201, r.text
    ann = ScriptedAgent(guarded.url, tokens["ann"], "ann", "ben")
    ben = ScriptedAgent(guarded.url, tokens["ben"], "ben", "ann")

    answers = []
    for turn in range(3 * N):
        answer = (ann, ben)[turn % 2].answer(turn)
        answers.append(answer)
        if answer.status_code != 201:
            break
    assert [a.status_code for a in answers] == [201] * N + [429], [a.text for a in answers]
    error = answers[-1].json()["error"]
    assert error["code"] == "LOOP_SUSPECTED"
    assert 1 <= int(answers[-1].headers["Retry-After"]) <= 900
    assert error["detail"]["retry_after"] == int(answers[-1].headers["Retry-After"])
    # The other agent is refused too; one loop.suspected message says so.
    assert ann.answer(99).status_code == ben.answer(99).status_code == 429
    flags = Message.objects.filter(channel__name="loop", status="loop.suspected")
    assert flags.count() == 1 and flags.get().kind == Message.Kind.AUDIT

    # A human steps in: the agents may post again, and a new run starts from nothing.
    human = httpx.post(
        f"{guarded.url}/api/v1/channels/loop/messages/",
        json={"title": "stop, summarize"},
        headers=auth(person),
    )
    assert human.status_code == 201, human.text
    for turn in range(N - 1):
        assert (ann, ben)[turn % 2].answer(turn).status_code == 201
    assert flags.count() == 1
    assert Message.objects.filter(channel__name="loop", kind="message").count() == 2 * N


def test_the_same_traffic_with_tasks_changing_is_never_flagged(guarded):
    tokens = {name: token_create(agent=agent_get_or_create(name=name)) for name in ("ann", "ben")}
    r = httpx.post(
        f"{guarded.url}/api/v1/channels/", json={"name": "loop"}, headers=auth(tokens["ann"])
    )
    assert r.status_code == 201, r.text
    ann = ScriptedAgent(guarded.url, tokens["ann"], "ann", "ben")
    ben = ScriptedAgent(guarded.url, tokens["ben"], "ben", "ann")
    for turn in range(3 * N):
        agent = (ann, ben)[turn % 2]
        assert agent.answer(turn).status_code == 201
        if turn % (N // 2) == 0:
            task = agent.http.post(
                "/api/v1/channels/loop/tasks/", json={"id": f"T-{turn}", "title": f"step {turn}"}
            )
            assert task.status_code == 201, task.text
    assert not Message.objects.filter(channel__name="loop", status="loop.suspected").exists()


def test_many_agents_posting_at_once_cross_the_threshold_once(guarded):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent posters under PostgreSQL's row locks")
    posters = 4 * N
    tokens = [token_create(agent=agent_get_or_create(name=f"echo{i}")) for i in range(posters)]
    r = httpx.post(
        f"{guarded.url}/api/v1/channels/", json={"name": "storm"}, headers=auth(tokens[0])
    )
    assert r.status_code == 201, r.text
    answers = together(
        [guarded.url],
        tokens,
        lambda http, i: http.post("/api/v1/channels/storm/messages/", json={"title": f"m{i}"}),
    )
    # The N-th post flags the channel; the refusal is for the agents of the run before the flag
    # only (a third agent is never silenced by others' run), so every first post lands.
    assert [a.status_code for a in answers] == [201] * posters, [a.text for a in answers]
    [flag] = Message.objects.filter(channel__name="storm", status="loop.suspected")
    assert Message.objects.filter(channel__name="storm", kind="message").count() == posters
    run = Message.objects.filter(channel__name="storm", kind="message", seq__lt=flag.seq)
    assert run.count() == N
    in_run = {int(name.removeprefix("echo")) for name in run.values_list("sender", flat=True)}
    again = together(
        [guarded.url],
        tokens,
        lambda http, i: http.post("/api/v1/channels/storm/messages/", json={"title": f"n{i}"}),
    )
    assert {i for i, a in enumerate(again) if a.status_code == 429} == in_run
    assert {a.json()["error"]["code"] for a in again if a.status_code == 429} == {"LOOP_SUSPECTED"}
    assert Message.objects.filter(channel__name="storm", status="loop.suspected").count() == 1
    assert "Traceback" not in guarded.output()
