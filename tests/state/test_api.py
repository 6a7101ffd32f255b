"""The state endpoints: formats, the stored snapshot, hostile input (a 4xx with a stable code
that changes nothing), authentication and the visibility rule of every channel endpoint."""

from __future__ import annotations

import pytest

from agentchat.models import StateSnapshot
from channels_app.models import Message
from tests.errors import error_code

pytestmark = pytest.mark.django_db


def code(response) -> tuple[int, str]:
    return response.status_code, error_code(response)


@pytest.fixture
def alice(api_for):
    client = api_for("alice")
    assert (
        client.post("/api/v1/channels/", {"name": "room", "topic": "t"}, format="json").status_code
        == 201
    )
    client.post("/api/v1/channels/room/messages/", {"title": "Decision: go", "body": "yes"},
                format="json")  # fmt: skip
    return client


def test_state_answers_json_by_default_and_markdown_on_request(alice):
    response = alice.get("/api/v1/channels/room/state/")
    assert response["Content-Type"] == "application/json"
    assert response.json()["decisions"][0]["title"] == "go"
    for asked in ({"format": "json"}, {"format": ""}):
        assert alice.get("/api/v1/channels/room/state/", asked).json()["channel"] == "room"
    md = alice.get("/api/v1/channels/room/state/", {"format": "md"})
    assert (md.status_code, md["Content-Type"]) == (200, "text/markdown; charset=utf-8")
    assert md.content.startswith(b"# State: room\n\n## Goal & Topic\n")
    assert b"- `[#0001]` **go** (by `alice` at `" in md.content


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"format": "xml"}, (400, "INVALID_VALUE")),
        ({"format": "MD"}, (400, "INVALID_VALUE")),
        ({"format": "md\x00"}, (400, "INVALID_VALUE")),
        ({"strict": "yes"}, (400, "INVALID_VALUE")),
        ({"strict": "2"}, (400, "INVALID_VALUE")),
        ({"strict": "1" * 10_000}, (400, "INVALID_VALUE")),
        ({"since": "1"}, (400, "UNKNOWN_FIELD")),
        ({"x" * 5000: "1"}, (400, "UNKNOWN_FIELD")),
    ],
)
def test_hostile_state_parameters_are_refused_with_a_stable_code(alice, params, expected):
    response = alice.get("/api/v1/channels/room/state/", params)
    assert code(response) == expected
    assert len(response.content) < 2000  # the echo of a value is cut


def test_a_parameter_given_twice_is_refused(alice):
    response = alice.get("/api/v1/channels/room/state/?format=md&format=json")
    assert code(response) == (400, "INVALID_VALUE")


def test_an_accept_header_without_the_format_is_not_acceptable(alice):
    response = alice.get("/api/v1/channels/room/state/", HTTP_ACCEPT="text/html")
    assert code(response) == (406, "NOT_ACCEPTABLE")
    md = alice.get("/api/v1/channels/room/state/", {"format": "md"}, HTTP_ACCEPT="text/*")
    assert md.status_code == 200
    response = alice.get(
        "/api/v1/channels/room/state/", {"format": "md"}, HTTP_ACCEPT="application/json"
    )
    assert code(response) == (406, "NOT_ACCEPTABLE")


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ({"strict": "yes"}, (400, "INVALID_TYPE")),
        ({"strict": 1}, (400, "INVALID_TYPE")),
        ({"strict": None}, (400, "INVALID_TYPE")),
        ({"force": True}, (400, "UNKNOWN_FIELD")),
        ([], (400, "INVALID_JSON")),
    ],
)
def test_hostile_compactions_are_refused_and_change_nothing(alice, body, expected):
    before = Message.objects.count()
    response = alice.post("/api/v1/channels/room/compact/", body, format="json")
    assert code(response) == expected
    assert (Message.objects.count(), StateSnapshot.objects.count()) == (before, 0)


def test_compact_takes_no_query_parameters(alice):
    response = alice.post("/api/v1/channels/room/compact/?strict=1", {}, format="json")
    assert code(response) == (400, "UNKNOWN_FIELD")
    assert StateSnapshot.objects.count() == 0


def test_the_snapshot_is_not_found_until_a_compaction(alice):
    assert code(alice.get("/api/v1/channels/room/state/snapshot/")) == (
        404,
        "STATE_RECORD_NOT_FOUND",
    )
    compacted = alice.post("/api/v1/channels/room/compact/", {}, format="json").json()
    snapshot = alice.get("/api/v1/channels/room/state/snapshot/").json()
    summary = snapshot.pop("summary")
    assert snapshot == compacted
    assert summary["last_seq"] == compacted["last_seq"] == 1
    md = alice.get("/api/v1/channels/room/state/snapshot/", {"format": "md"})
    assert md["Content-Type"] == "text/markdown; charset=utf-8"
    assert md.content.decode() == compacted["markdown"]
    assert code(alice.get("/api/v1/channels/room/state/snapshot/", {"strict": "1"})) == (
        400,
        "UNKNOWN_FIELD",
    )


ROUTES = (
    ("get", "/api/v1/channels/{}/state/"),
    ("get", "/api/v1/channels/{}/state/?format=md"),
    ("get", "/api/v1/channels/{}/state/snapshot/"),
    ("post", "/api/v1/channels/{}/compact/"),
)


@pytest.mark.parametrize(("method", "route"), ROUTES)
def test_a_members_only_channel_does_not_exist_for_a_non_member(api_for, method, route):
    carol, dave = api_for("carol"), api_for("dave")
    created = carol.post(
        "/api/v1/channels/",
        {"name": "secret", "visibility": "members", "members": ["carol"]},
        format="json",
    )
    assert created.status_code == 201
    before = Message.objects.count()
    hidden = getattr(dave, method)(route.format("secret"), format="json")
    missing = getattr(dave, method)(route.format("nowhere"), format="json")
    assert code(hidden) == (404, "CHANNEL_NOT_FOUND")
    assert hidden.json()["error"]["detail"] == {"name": "secret"}
    assert hidden.json()["error"]["message"] == missing.json()["error"]["message"].replace(
        "nowhere", "secret"
    )
    assert (Message.objects.count(), StateSnapshot.objects.count()) == (before, 0)
    if "snapshot" not in route:
        assert getattr(carol, method)(route.format("secret"), format="json").status_code in (
            200,
            201,
        )


@pytest.mark.parametrize(("method", "route"), ROUTES)
def test_every_state_endpoint_needs_a_token(api_client, alice, method, route):
    response = getattr(api_client, method)(route.format("room"), format="json")
    assert code(response) == (401, "AUTH_REQUIRED")


@pytest.mark.parametrize("name", ["..", "a%00b", "x" * 65, "state.md", "ROOM%2F.."])
def test_hostile_channel_names_are_not_found(alice, name):
    for method, route in ROUTES:
        response = getattr(alice, method)(route.format(name), format="json")
        assert response.status_code == 404, (route, response.content)
    assert StateSnapshot.objects.count() == 0


def test_the_openapi_schema_documents_the_state_endpoints(api_client):
    schema = api_client.get("/api/v1/schema/?format=json").json()
    paths = schema["paths"]
    state = paths["/api/v1/channels/{name}/state/"]["get"]
    assert state["operationId"] == "state_show"
    assert set(state["responses"]["200"]["content"]) == {"application/json", "text/markdown"}
    assert "STATE_MALFORMED_SOURCE" in state["x-error-codes"]
    assert {p["name"] for p in state["parameters"]} >= {"format", "strict"}
    compact = paths["/api/v1/channels/{name}/compact/"]["post"]
    assert compact["operationId"] == "state_compact"
    assert "201" in compact["responses"]
    snapshot = paths["/api/v1/channels/{name}/state/snapshot/"]["get"]
    assert "STATE_RECORD_NOT_FOUND" in snapshot["x-error-codes"]
