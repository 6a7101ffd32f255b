"""Every authenticated request is a heartbeat (EP-0118 §4's dynamic heartbeats), written
cheaply: a burst of reads writes the registration at most once per interval."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.identity import registry
from agentchat.core.models import Registration

pytestmark = pytest.mark.django_db

REGISTRATION_TABLE = Registration._meta.db_table


def writes_of_registrations(queries) -> list[str]:
    return [
        q["sql"]
        for q in queries
        if q["sql"].lstrip().upper().startswith("UPDATE") and REGISTRATION_TABLE in q["sql"]
    ]


def register(api):
    answer = api.post("/api/v1/agents/register/", {"harness": "h", "agent": "alice"}, format="json")
    assert answer.status_code == 201, answer.content


def test_a_burst_of_reads_writes_the_heartbeat_at_most_once(alice, clock, settings):
    settings.AGENTCHAT_HEARTBEAT_SECONDS = 5
    register(alice)
    clock.advance(6)  # the heartbeat is due
    with CaptureQueriesContext(connection) as queries:
        for _ in range(30):
            assert alice.get("/api/v1/me/").status_code == 200
    assert len(writes_of_registrations(queries.captured_queries)) == 1
    seen = Registration.objects.get(agent__name="alice").last_heartbeat
    assert seen == clock.current
    with CaptureQueriesContext(connection) as queries:
        for _ in range(30):
            clock.advance(0.1)  # 3 s in all: still within the interval
            alice.get("/api/v1/channels/")
    assert writes_of_registrations(queries.captured_queries) == []
    clock.advance(2.5)
    with CaptureQueriesContext(connection) as queries:
        alice.get("/api/v1/me/")
        alice.get("/api/v1/me/")
    assert len(writes_of_registrations(queries.captured_queries)) == 1


def test_a_request_keeps_a_registration_fresh_and_silence_makes_it_stale(
    alice, bob, clock, settings
):
    settings.AGENTCHAT_STALE_SECONDS = 300
    register(alice)
    for _ in range(5):
        clock.advance(200)
        alice.get("/api/v1/me/")  # any request, a read included
    listed = {a["agent"]: a for a in bob.get("/api/v1/agents/").json()["agents"]}
    assert listed["alice"]["status"] == "active"
    clock.advance(301)
    listed = {a["agent"]: a for a in bob.get("/api/v1/agents/").json()["agents"]}
    assert listed["alice"]["status"] == "stale"


def test_an_agent_without_a_registration_writes_no_heartbeat(alice, clock):
    alice.get("/api/v1/me/")  # the token's once-a-minute touch
    clock.advance(10)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(10):
            alice.get("/api/v1/me/")
    assert [
        q for q in queries.captured_queries if q["sql"].lstrip().upper().startswith("UPDATE")
    ] == []


def test_concurrent_heartbeats_of_several_processes_change_the_row_once(alice, clock, settings):
    settings.AGENTCHAT_HEARTBEAT_SECONDS = 5
    register(alice)
    agent_id = Registration.objects.get(agent__name="alice").pk
    clock.advance(6)
    written = []
    for _ in range(10):
        registry._written.clear()  # each a process of its own: none saw the others' write
        written.append(registry.heartbeat_write(agent_id, now=clock.current))
    assert written.count(True) == 1


def acting_as(api, name):
    api.credentials(**{**api._credentials, "HTTP_AGENTCHAT_AS": name})
    return api


def test_a_parent_token_acting_as_a_sub_agent_heartbeats_it_at_most_once(api_for, clock, settings):
    settings.AGENTCHAT_HEARTBEAT_SECONDS = 5
    parent = api_for("hera")
    for name in ("hera", "hera.critic"):
        answer = parent.post(
            "/api/v1/agents/register/", {"harness": "h", "agent": name}, format="json"
        )
        assert answer.status_code == 201, answer.content
    sub = acting_as(api_for("hera"), "hera.critic")
    clock.advance(6)  # both heartbeats are due
    with CaptureQueriesContext(connection) as queries:
        for _ in range(30):
            assert sub.get("/api/v1/me/").json()["name"] == "hera.critic"
    # One write for the sub-agent the requests act as, one for the parent whose token runs them.
    assert len(writes_of_registrations(queries.captured_queries)) == 2
    beats = dict(Registration.objects.values_list("agent__name", "last_heartbeat"))
    assert beats == {"hera": clock.current, "hera.critic": clock.current}
    with CaptureQueriesContext(connection) as queries:
        for _ in range(20):
            clock.advance(0.2)  # 4 s: within the interval
            sub.get("/api/v1/me/")
    assert writes_of_registrations(queries.captured_queries) == []
    clock.advance(1.5)
    with CaptureQueriesContext(connection) as queries:
        sub.get("/api/v1/me/")
        sub.get("/api/v1/me/")
    assert len(writes_of_registrations(queries.captured_queries)) == 2
    assert Registration.objects.get(agent__name="hera.critic").last_heartbeat == clock.current


def test_a_sub_agent_never_registered_gets_no_heartbeat_write(api_for, clock):
    sub = acting_as(api_for("iris"), "iris.helper")
    sub.get("/api/v1/me/")
    clock.advance(10)
    with CaptureQueriesContext(connection) as queries:
        for _ in range(10):
            sub.get("/api/v1/me/")
    assert writes_of_registrations(queries.captured_queries) == []
    assert not Registration.objects.exists()
