"""The agent registry's API (EP-0118): registration and reclaim, heartbeats, staleness under a
controlled clock, the list, the idle handshake, and hostile input."""

from __future__ import annotations

import re

import pytest

from agentchat.core.models import Agent, Registration
from agentchat.core.rules.presence import RANDOM_HEX
from tests.errors import error_code

pytestmark = pytest.mark.django_db


def register(api, **body):
    body.setdefault("harness", "claude-code")
    return api.post("/api/v1/agents/register/", body, format="json")


def test_register_as_the_token_agent_then_reclaim_with_the_same_run_token(alice, clock):
    first = register(alice, agent="alice", run_token="rt-1", substrate="claude-sonnet-4.6")
    assert first.status_code == 201, first.content
    body = first.json()
    assert body["agent"] == "alice"
    assert body["status"] == "active"
    assert body["harness"] == "claude-code"
    assert body["substrate"] == "claude-sonnet-4.6"
    assert "run_token" not in body  # the client brought it
    clock.advance(30)
    again = register(alice, agent="alice", run_token="rt-1")
    assert again.status_code == 200, again.content
    assert again.json()["joined_at"] == body["joined_at"]  # the same registration
    assert again.json()["last_seen"] > body["last_seen"]


def test_a_second_live_registration_with_another_run_token_is_refused(alice):
    assert register(alice, agent="alice", run_token="rt-1").status_code == 201
    second = register(alice, agent="alice", run_token="rt-2")
    assert error_code(second) == "AGENT_ALREADY_ACTIVE"
    assert second.json()["error"]["detail"]["agent"] == "alice"
    assert Registration.objects.get(agent__name="alice").run_token_digest != ""


def test_registering_over_a_stale_registration_makes_a_new_one_and_refuses_the_old_run_token(
    alice, bob, clock, settings
):
    settings.AGENTCHAT_STALE_SECONDS = 300
    old = register(alice, agent="alice", run_token="rt-old").json()
    clock.advance(301)
    listed = bob.get("/api/v1/agents/").json()["agents"]
    assert [a["status"] for a in listed if a["agent"] == "alice"] == ["stale"]
    new = register(alice, agent="alice", run_token="rt-new")
    assert new.status_code == 201, new.content
    assert new.json()["joined_at"] > old["joined_at"]
    refused = alice.post("/api/v1/agents/heartbeat/", {"run_token": "rt-old"}, format="json")
    assert error_code(refused) == "AGENT_ALREADY_ACTIVE"
    assert register(alice, agent="alice", run_token="rt-old").status_code == 409
    clock.advance(301)  # the new one went stale too: the old token's registration is gone
    gone = alice.post("/api/v1/agents/heartbeat/", {"run_token": "rt-old"}, format="json")
    assert error_code(gone) == "AGENT_NOT_REGISTERED"


def test_an_idle_registration_frees_the_slot(alice):
    register(alice, agent="alice", run_token="rt-1")
    assert alice.post("/api/v1/agents/idle/", {}, format="json").status_code == 200
    assert register(alice, agent="alice", run_token="rt-2").status_code == 201


def test_an_omitted_agent_id_is_a_generated_sub_agent_in_the_eps_shape(alice):
    one = register(alice, substrate="Claude Sonnet 4.6", conversation_id="conv-1")
    two = register(alice, substrate="Claude Sonnet 4.6", conversation_id="conv-1")
    assert one.status_code == two.status_code == 201
    a, b = one.json(), two.json()
    shape = re.compile(rf"alice\.claude_sonnet_4_6_[0-9a-f]{{8}}_[0-9a-f]{{{RANDOM_HEX}}}")
    assert shape.fullmatch(a["agent"]) and shape.fullmatch(b["agent"])
    assert a["agent"] != b["agent"]
    # The same conversation hashes the same; the random part tells them apart.
    assert a["agent"].split("_")[-2] == b["agent"].split("_")[-2]
    assert a["run_token"].startswith("rt_") and a["run_token"] != b["run_token"]
    assert Agent.objects.get(name=a["agent"]).kind == "agent"
    assert not Registration.objects.filter(run_token_digest=a["run_token"]).exists()  # hashed


def test_a_generated_id_fits_the_agent_name_rule_for_a_long_parent(api_for):
    api = api_for("a" * 40)
    answer = register(api, substrate="x" * 90)
    assert answer.status_code == 201, answer.content
    assert len(answer.json()["agent"]) <= 64
    too_long = api_for("b" * 50)
    assert error_code(register(too_long)) == "INVALID_NAME"


def test_a_token_registers_only_its_own_namespace(alice, bob, make_agent):
    assert error_code(register(alice, agent="bob")) == "AGENT_OUTSIDE_NAMESPACE"
    assert error_code(register(alice, agent="alicex")) == "AGENT_OUTSIDE_NAMESPACE"
    assert register(alice, agent="alice.critic").status_code == 201
    Agent.objects.create(name="alice.human", kind="human")
    assert error_code(register(alice, agent="alice.human")) == "AGENT_OUTSIDE_NAMESPACE"
    assert error_code(register(alice, agent="Alice")) == "INVALID_NAME"


def test_heartbeat_without_a_registration_is_404(alice):
    answer = alice.post("/api/v1/agents/heartbeat/", {}, format="json")
    assert error_code(answer) == "AGENT_NOT_REGISTERED"
    sub = alice.post("/api/v1/agents/heartbeat/", {"agent": "alice.nobody"}, format="json")
    assert error_code(sub) == "AGENT_NOT_REGISTERED"


def test_heartbeat_sets_the_status_and_reverses_idle(alice, bob):
    register(alice, agent="alice", run_token="rt-a")
    register(bob, agent="bob", run_token="rt-b")
    tired = alice.post("/api/v1/agents/idle/", {"note": "done with T-1"}, format="json").json()
    assert tired == {"agent": "alice", "status": "idle", "others_active": 1, "last": False}
    listed = {a["agent"]: a for a in bob.get("/api/v1/agents/").json()["agents"]}
    assert listed["alice"]["status"] == "idle" and listed["alice"]["note"] == "done with T-1"
    # Bob finishing now is the last one out.
    assert bob.post("/api/v1/agents/idle/", {}, format="json").json()["last"] is True
    back = alice.post("/api/v1/agents/heartbeat/", {"run_token": "rt-a"}, format="json")
    assert back.status_code == 200 and back.json()["status"] == "active"
    assert back.json()["note"] == ""
    sleeping = bob.post("/api/v1/agents/heartbeat/", {"status": "sleeping"}, format="json")
    assert sleeping.json()["status"] == "sleeping"
    idle = bob.post("/api/v1/agents/heartbeat/", {"status": "idle"}, format="json")
    assert error_code(idle) == "INVALID_VALUE"


def test_the_idle_handshake_counts_only_fresh_active_agents_of_the_same_session(
    alice, bob, carol, clock, settings
):
    settings.AGENTCHAT_STALE_SECONDS = 300
    alice.post("/api/v1/channels/", {"name": "sess"}, format="json")
    register(alice, agent="alice", session="sess")
    register(bob, agent="bob", session="sess")
    register(carol, agent="carol")  # another session (none): not counted
    clock.advance(200)
    alice.get("/api/v1/me/")  # a request is a heartbeat
    clock.advance(200)  # bob is stale now, alice is not
    answer = alice.post("/api/v1/agents/idle/", {}, format="json").json()
    assert answer == {"agent": "alice", "status": "idle", "others_active": 0, "last": True}


def test_the_list_shows_every_agent_with_its_presence(alice, bob, make_agent):
    make_agent("zed")
    register(alice, agent="alice", harness="codex", substrate="gpt-5")
    agents = {a["agent"]: a for a in bob.get("/api/v1/agents/").json()["agents"]}
    assert set(agents) >= {"alice", "bob", "zed"}
    assert agents["alice"]["status"] == "active"
    assert agents["alice"]["harness"] == "codex"
    assert agents["alice"]["last_seen"]
    assert agents["zed"]["status"] is None and agents["zed"]["last_seen"] is None
    page = bob.get("/api/v1/agents/", {"limit": 1}).json()
    assert page["more"] is True and page["next"] == "alice"
    rest = bob.get("/api/v1/agents/", {"after": "alice"}).json()
    assert [a["agent"] for a in rest["agents"]][:1] == ["bob"]


def test_the_list_hides_a_session_the_viewer_may_not_see(alice, bob):
    alice.post("/api/v1/channels/", {"name": "secret", "visibility": "members"}, format="json")
    register(alice, agent="alice", session="secret")
    mine = {a["agent"]: a for a in alice.get("/api/v1/agents/").json()["agents"]}
    theirs = {a["agent"]: a for a in bob.get("/api/v1/agents/").json()["agents"]}
    assert mine["alice"]["session"] == "secret"
    assert theirs["alice"]["session"] is None
    assert error_code(bob.get("/api/v1/agents/", {"session": "secret"})) == "CHANNEL_NOT_FOUND"
    assert error_code(register(bob, agent="bob", session="secret")) == "CHANNEL_NOT_FOUND"
    only = alice.get("/api/v1/agents/", {"session": "secret"}).json()["agents"]
    assert [a["agent"] for a in only] == ["alice"]


@pytest.mark.parametrize("path", ["agents", "agents/register", "agents/heartbeat", "agents/idle"])
def test_the_paths_work_without_their_trailing_slash(alice, path):
    register(alice, agent="alice")
    method = alice.get if path == "agents" else alice.post
    body = {"harness": "x"} if path == "agents/register" else {}
    answer = method(f"/api/v1/{path}", body, format="json")
    assert answer.status_code < 300, answer.content


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"harness": "claude\ud800"}, "INVALID_TEXT"),
        ({"harness": "claude\x07"}, "INVALID_VALUE"),
        ({"harness": "claude\u202e"}, "INVISIBLE_CHARACTER"),
        ({"harness": ""}, "INVALID_VALUE"),
        ({"harness": "h" * 101}, "INVALID_VALUE"),
        ({"harness": "h" * 600_000}, "FIELD_TOO_LARGE"),
        ({"harness": 5}, "INVALID_TYPE"),
        ({}, "MISSING_FIELD"),
        ({"harness": "h", "run_token": ""}, "INVALID_VALUE"),
        ({"harness": "h", "run_token": "x" * 201}, "INVALID_VALUE"),
        ({"harness": "h", "substrate": "a\nb"}, "INVALID_VALUE"),
        ({"harness": "h", "agent": "alice/../x"}, "INVALID_NAME"),
        ({"harness": "h", "agent": "alice.\x00"}, "INVALID_TEXT"),
        ({"harness": "h", "session": "no such"}, "CHANNEL_NOT_FOUND"),
        ({"harness": "h", "colour": "red"}, "UNKNOWN_FIELD"),
    ],
)
def test_hostile_registrations_are_refused_with_a_code(alice, body, code):
    if code == "INVALID_TEXT":  # a lone surrogate: only a raw body can carry one
        answer = alice.post(
            "/api/v1/agents/register/",
            b'{"harness": "claude\\ud800"}',
            content_type="application/json",
        )
    else:
        answer = alice.post("/api/v1/agents/register/", body, format="json")
    assert error_code(answer) == code
    assert not Registration.objects.exists()


def test_hostile_notes_and_statuses_are_refused(alice):
    register(alice, agent="alice")
    assert error_code(alice.post("/api/v1/agents/idle/", {"note": "x" * 2001}, format="json")) == (
        "INVALID_VALUE"
    )
    assert error_code(alice.post("/api/v1/agents/idle/", {"note": "a\x00"}, format="json")) == (
        "INVALID_TEXT"
    )
    assert error_code(
        alice.post("/api/v1/agents/heartbeat/", {"status": ["active"]}, format="json")
    ) in ("INVALID_TYPE", "INVALID_VALUE")
    assert error_code(alice.get("/api/v1/agents/", {"after": "A\x00"})) == "INVALID_NAME"
    assert error_code(alice.get("/api/v1/agents/", {"limit": "0"})) == "INVALID_VALUE"


def test_a_registration_that_makes_a_sub_agent_takes_a_post_from_the_budget(alice, settings):
    settings.AGENTCHAT_POST_RATE = "2/hour"
    assert register(alice, agent="alice").status_code == 201  # no new agent: free
    assert register(alice).status_code == 201
    assert register(alice, agent="alice.critic").status_code == 201
    refused = register(alice)
    assert error_code(refused) == "RATE_LIMITED"
    assert refused["Retry-After"].isdigit()
    assert Agent.objects.filter(name__startswith="alice.").count() == 2  # nothing made
    assert register(alice, agent="alice.critic", run_token="x").status_code == 409  # exists
