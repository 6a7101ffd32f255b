"""The sub-agent cap under real concurrent clients: made under the parent's row lock, so
requests making the 256th sub-agent at once are one winner and the rest SUBAGENTS_TOO_MANY."""

from __future__ import annotations

import pytest
from django.db import connection

from agentchat.core.identity.registry import SUBAGENTS_MAX
from agentchat.core.identity.services import agent_get_or_create, token_create
from agentchat.core.models import Agent
from tests.channels_app.test_agents_live import together

RACERS = 8


@pytest.mark.parametrize("path", ["/api/v1/me/", "/api/v1/agents/register/"])
def test_requests_making_the_last_sub_agent_at_once_have_one_winner(live, path):
    if connection.vendor != "postgresql":
        pytest.skip("concurrent transactions under PostgreSQL's row locks")
    parent = agent_get_or_create(name="zed")
    token = token_create(agent=parent)
    Agent.objects.bulk_create(
        Agent(name=f"zed.s{i}", kind=Agent.Kind.AGENT) for i in range(SUBAGENTS_MAX - 1)
    )

    def make(http, i):
        name = f"zed.new{i}"
        if path.endswith("register/"):
            return http.post(path, json={"agent": name, "harness": "race"})
        return http.get(path, headers={"AgentChat-As": name})

    answers = together([live.url], [token] * RACERS, make)
    won = [a for a in answers if a.status_code in (200, 201)]
    lost = [a for a in answers if a not in won]
    assert len(won) == 1, [a.text for a in answers]
    assert {a.json()["error"]["code"] for a in lost} == {"SUBAGENTS_TOO_MANY"}, [
        a.text for a in lost
    ]
    assert Agent.objects.filter(name__startswith="zed.").count() == SUBAGENTS_MAX
    assert "Traceback" not in live.output()
