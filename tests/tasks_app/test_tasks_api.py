"""Create, list, show and update over REST (in-process client)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tasks_app.models import Task
from tests.tasks_app.helpers import (
    audit_payloads,
    create,
    created,
    error,
    show,
    tasks_url,
    unchanged,
    update,
    updated,
)

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 29, 15, 46, 18, 654321, tzinfo=UTC)


@pytest.fixture
def at_t0(clock):
    clock.current = T0
    return clock


# --- create ----------------------------------------------------------------------------------


def test_create_returns_the_reference_record_with_lease_and_readiness(alice, backend, at_t0):
    response = create(
        alice,
        "T-0001",
        title="Design payments schema",
        owner="bob",
        files_hint=["db/schema.sql"],
        acceptance=["migration applies cleanly", "reviewed by carol"],
        branch="feat/payments-schema",
    )
    assert response.status_code == 201
    body = response.json()
    assert list(body) == [
        "id",
        "channel",
        "title",
        "status",
        "owner",
        "created_by",
        "depends_on",
        "files_hint",
        "acceptance",
        "lease_expires_at",
        "branch",
        "updated_at",
        "fence",
        "lease",
        "ready",
        "blocked_by",
    ]
    assert body == {
        "id": "T-0001",
        "channel": "backend",
        "title": "Design payments schema",
        "status": "open",
        "owner": "bob",
        "created_by": "alice",
        "depends_on": [],
        "files_hint": ["db/schema.sql"],
        "acceptance": ["migration applies cleanly", "reviewed by carol"],
        "lease_expires_at": None,
        "branch": "feat/payments-schema",
        "updated_at": "2026-11-29T15:46:18+00:00",
        "fence": 0,
        "lease": None,
        "ready": True,
        "blocked_by": [],
    }


def test_create_posts_task_created_from_the_caller(alice, backend, at_t0):
    created(alice, "T-1")
    assert audit_payloads() == [
        {
            "channel": "backend",
            "event": "task.created",
            "lease_expires_at": None,
            "owner": None,
            "status": "open",
            "task_id": "T-1",
            "updated_at": "2026-11-29T15:46:18+00:00",
        }
    ]


def test_create_accepts_an_empty_title_and_a_matching_created_by(alice, backend):
    assert created(alice, "T-1", title="", created_by="alice")["title"] == ""


def test_create_refuses_created_by_another_agent(alice, backend):
    with unchanged():
        error(create(alice, "T-1", created_by="bob"), 403, "SENDER_MISMATCH")


@pytest.mark.parametrize("other", ["t-1", "T-1"])
def test_create_existing_id_fails_with_task_already_exists_in_any_case(alice, backend, other):
    created(alice, "t-1")
    with unchanged():
        err = error(create(alice, other), 409, "TASK_ALREADY_EXISTS")
    assert err["message"] == "task record already exists: t-1"


def test_same_id_in_another_channel_is_another_task(alice, backend):
    assert alice.post("/api/v1/channels/", {"name": "design"}, format="json").status_code == 201
    created(alice, "T-1")
    assert create(alice, "T-1", channel="design").status_code == 201


@pytest.mark.parametrize(
    "task_id",
    ["bad id", "-lead", ".hidden", "a/b", "é", "", "x" * 129, "recover-pending", 7, None, ["T"]],
)
def test_create_with_a_bad_id_fails_with_task_invalid_id(alice, backend, task_id):
    with unchanged():
        error(create(alice, task_id), 400, "TASK_INVALID_ID")


def test_create_accepts_an_id_of_128_characters(alice, backend):
    assert created(alice, "x" * 128)["id"] == "x" * 128


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("title", "two\nlines", "TASK_INVALID_TITLE"),
        ("title", "cr\r", "TASK_INVALID_TITLE"),
        ("title", "nul\x00", "INVALID_TEXT"),  # refused by the JSON layer
        ("title", 5, "TASK_INVALID_TITLE"),
        ("title", None, "TASK_INVALID_TITLE"),
        ("owner", "Bob", "TASK_INVALID_OWNER"),
        ("owner", "bad name", "TASK_INVALID_OWNER"),
        ("owner", "", "TASK_INVALID_OWNER"),
        ("owner", 3, "TASK_INVALID_OWNER"),
        ("branch", " ", "TASK_INVALID_BRANCH"),
        ("branch", "a\nb", "TASK_INVALID_BRANCH"),
        ("depends_on", "T-0", "TASK_INVALID_DEPENDS_ON"),
        ("depends_on", ["bad id"], "TASK_INVALID_DEPENDENCY_ID"),
        ("depends_on", ["T-0", "T-0"], "TASK_DUPLICATE_DEPENDENCY"),
        ("files_hint", "a.py", "TASK_INVALID_FILES_HINT"),
        ("files_hint", ["../escape.py"], "TASK_PATH_OUTSIDE_WORKSPACE"),
        ("files_hint", ["/abs/path"], "TASK_PATH_OUTSIDE_WORKSPACE"),
        ("files_hint", ["C:\\x.py"], "TASK_PATH_OUTSIDE_WORKSPACE"),
        ("files_hint", ["a:b"], "TASK_PATH_OUTSIDE_WORKSPACE"),
        ("files_hint", [""], "TASK_PATH_OUTSIDE_WORKSPACE"),
        ("acceptance", [" "], "TASK_INVALID_ACCEPTANCE"),
        ("acceptance", [1], "TASK_INVALID_ACCEPTANCE"),
        ("acceptance", None, "TASK_INVALID_ACCEPTANCE"),
        ("status", "open", "TASK_UNKNOWN_FIELD"),
        ("lease_expires_at", None, "TASK_UNKNOWN_FIELD"),
    ],
)
def test_create_refuses_bad_values_with_the_field_code(alice, backend, field, value, code):
    created(alice, "T-0")
    with unchanged():
        err = error(create(alice, "T-1", **{field: value}), 400, code)
    assert "message" in err


def test_create_error_messages_are_the_reference_ones(alice, backend):
    err = error(
        create(alice, "T-1", files_hint=["../escape.py"]), 400, "TASK_PATH_OUTSIDE_WORKSPACE"
    )
    assert err["message"] == (
        "files_hint path is outside the channel workspace: '../escape.py' "
        "(parent traversal is not allowed)"
    )
    err = error(create(alice, "bad id"), 400, "TASK_INVALID_ID")
    assert err["message"] == "id must contain only letters, digits, '.', '_' or '-'"


def test_create_without_a_title_fails_with_a_missing_field_code(alice, backend):
    response = alice.post(tasks_url(), {"id": "T-1"}, format="json")
    err = error(response, 400, "TASK_REQUIRED_FIELD_MISSING")
    assert err["detail"] == {"field": "title"}


def test_create_in_an_unknown_channel_fails_with_channel_not_found(alice, backend):
    error(create(alice, "T-1", channel="nosuch"), 404, "CHANNEL_NOT_FOUND")


def test_create_needs_a_token(api_client, backend):
    response = api_client.post(
        tasks_url(), {"id": "T-1", "title": "x"}, content_type="application/json"
    )
    error(response, 401, "AUTH_REQUIRED")


def test_recover_pending_is_not_a_task_id_and_answers_nothing_pending(alice, backend):
    with unchanged():
        err = error(
            alice.post(tasks_url() + "recover-pending/"), 409, "LEASE_TRANSACTION_NOT_FOUND"
        )
    assert "no pending" in err["message"]
    assert err["detail"] == {"channel": "backend"}
    error(alice.post("/api/v1/channels/nosuch/tasks/recover-pending/"), 404, "CHANNEL_NOT_FOUND")
    error(alice.get(tasks_url() + "recover-pending/"), 405, "METHOD_NOT_ALLOWED")


# --- list and show --------------------------------------------------------------------------


def test_list_says_what_is_ready_and_what_blocks(alice, bob, backend):
    created(alice, "A")
    created(alice, "B", depends_on=["A"], owner="bob")
    created(alice, "C", depends_on=["B", "A"])
    tasks = alice.get(tasks_url()).json()["tasks"]
    assert [(t["id"], t["ready"], t["blocked_by"]) for t in tasks] == [
        ("A", True, []),
        ("B", False, [{"id": "A", "status": "open"}]),
        ("C", False, [{"id": "B", "status": "open"}, {"id": "A", "status": "open"}]),
    ]
    updated(alice, "A", status="in_progress")
    updated(alice, "A", status="done")
    tasks = alice.get(tasks_url()).json()["tasks"]
    assert [(t["id"], t["ready"], t["blocked_by"]) for t in tasks] == [
        ("A", True, []),
        ("B", True, []),
        ("C", False, [{"id": "B", "status": "open"}]),
    ]


def test_list_costs_the_same_queries_for_one_task_or_many(alice, backend, assert_max_queries):
    created(alice, "A")
    for i in range(10):
        created(alice, f"T{i}", depends_on=["A"])
    created(alice, "Z", depends_on=["T0", "T1"])
    # Authentication, the channel, the page's plan (keys and sizes of 8 tasks, then of the
    # next 16: agentchat.core.http.pages), the tasks with their channel and lease, their links.
    with assert_max_queries(6):
        tasks = alice.get(tasks_url()).json()["tasks"]
    assert len(tasks) == 12
    assert tasks[-1]["depends_on"] == ["T0", "T1"]


def test_list_filters_by_status_and_owner(alice, backend):
    created(alice, "A", owner="bob")
    created(alice, "B")
    created(alice, "C", owner="bob")
    updated(alice, "C", status="blocked")

    def ids(query: str) -> list[str]:
        response = alice.get(tasks_url() + query)
        assert response.status_code == 200
        return [t["id"] for t in response.json()["tasks"]]

    assert ids("") == ["A", "B", "C"]
    assert ids("?status=open") == ["A", "B"]
    assert ids("?owner=bob") == ["A", "C"]
    assert ids("?owner=bob&status=blocked") == ["C"]
    assert ids("?status=done") == []
    error(alice.get(tasks_url() + "?status=bogus"), 400, "TASK_INVALID_STATUS")


def test_list_of_an_unknown_channel_fails(alice, backend):
    error(alice.get("/api/v1/channels/nosuch/tasks/"), 404, "CHANNEL_NOT_FOUND")


def test_show_unknown_task_fails_with_task_not_found(alice, backend):
    err = error(alice.get(tasks_url("T-9999")), 404, "TASK_NOT_FOUND")
    assert err["message"] == "task record does not exist: T-9999"


def test_show_looks_ids_up_exactly(alice, backend):
    created(alice, "T-1")
    error(alice.get(tasks_url("t-1")), 404, "TASK_NOT_FOUND")


# --- update ---------------------------------------------------------------------------------


def test_update_replaces_lists_and_sets_fields(alice, backend, clock):
    created(alice, "A")
    created(alice, "B")
    created(alice, "T", files_hint=["a.py"], acceptance=["x"], depends_on=["A"])
    clock.current = T0
    body = updated(
        alice,
        "T",
        title="New",
        owner="carol",
        depends_on=["B"],
        files_hint=["b.py", "c/d.py"],
        acceptance=["y", "z"],
        branch="feat/x",
    )
    assert {
        k: body[k]
        for k in (
            "title",
            "owner",
            "depends_on",
            "files_hint",
            "acceptance",
            "branch",
            "updated_at",
            "created_by",
        )
    } == {
        "title": "New",
        "owner": "carol",
        "depends_on": ["B"],
        "files_hint": ["b.py", "c/d.py"],
        "acceptance": ["y", "z"],
        "branch": "feat/x",
        "updated_at": "2026-11-29T15:46:18+00:00",
        "created_by": "alice",
    }
    assert show(alice, "T") == body
    payload = audit_payloads()[-1]
    assert payload == {
        "changed_fields": [
            "acceptance",
            "branch",
            "depends_on",
            "files_hint",
            "owner",
            "title",
            "updated_at",
        ],
        "channel": "backend",
        "event": "task.updated",
        "lease_expires_at": None,
        "owner": "carol",
        "previous_status": "open",
        "status": "open",
        "task_id": "T",
        "updated_at": "2026-11-29T15:46:18+00:00",
    }


def test_update_clear_forms_set_owner_and_branch_to_null(alice, backend):
    created(alice, "T", owner="bob", branch="b")
    body = updated(alice, "T", clear_owner=True, clear_branch=True)
    assert (body["owner"], body["branch"]) == (None, None)
    assert audit_payloads()[-1]["changed_fields"][:2] == ["branch", "owner"]


def test_update_to_empty_lists(alice, backend):
    created(alice, "A")
    created(alice, "T", depends_on=["A"], files_hint=["x"], acceptance=["y"])
    body = updated(alice, "T", depends_on=[], files_hint=[], acceptance=[])
    assert (body["depends_on"], body["files_hint"], body["acceptance"]) == ([], [], [])


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "TASK_INVALID_UPDATE"),
        ({"clear_owner": False}, "TASK_INVALID_UPDATE"),
        ({"owner": "bob", "clear_owner": True}, "TASK_INVALID_UPDATE"),
        ({"branch": "b", "clear_branch": True}, "TASK_INVALID_UPDATE"),
        ({"clear_owner": "yes"}, "TASK_INVALID_UPDATE"),
        ({"owner": None}, "TASK_INVALID_OWNER"),
        ({"branch": None}, "TASK_INVALID_BRANCH"),
        ({"status": "bogus"}, "TASK_INVALID_STATUS"),
        ({"status": None}, "TASK_INVALID_STATUS"),
        ({"title": "a\nb"}, "TASK_INVALID_TITLE"),
        ({"id": "other"}, "TASK_UNKNOWN_FIELD"),
        ({"lease_expires_at": None}, "TASK_UNKNOWN_FIELD"),
        ({"depends_on": ["nope"]}, "TASK_UNKNOWN_DEPENDENCY"),
    ],
)
def test_bad_update_fails_with_its_code_and_changes_nothing(alice, backend, body, code):
    created(alice, "T")
    with unchanged():
        error(update(alice, "T", **body), 400, code)


def test_empty_update_message_is_the_reference_one(alice, backend):
    created(alice, "T")
    err = error(update(alice, "T"), 400, "TASK_INVALID_UPDATE")
    assert err["message"] == "task update requires at least one field"


def test_update_of_unknown_task_fails_with_task_not_found(alice, backend):
    with unchanged():
        error(update(alice, "nope", title="x"), 404, "TASK_NOT_FOUND")


def test_same_state_update_succeeds_and_posts_one_task_updated(alice, backend, clock):
    created(alice, "T")
    before = len(audit_payloads())
    body = updated(alice, "T", status="open")
    assert body["status"] == "open"
    payloads = audit_payloads()
    assert len(payloads) == before + 1
    assert payloads[-1]["event"] == "task.updated"
    assert payloads[-1]["previous_status"] == "open"


def test_timestamps_are_timezone_aware_and_spelled_by_operation(alice, backend, at_t0):
    created(alice, "T")
    task = Task.objects.get(task_id="T")
    assert task.updated_at.tzinfo is not None
    # Stored as the precise clock said; spelled to the second, as the reference writes it.
    assert task.updated_at == T0
    assert show(alice, "T")["updated_at"] == "2026-11-29T15:46:18+00:00"


def test_openapi_schema_documents_the_task_endpoints_and_their_codes(alice):
    response = alice.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    schema = response.json()
    paths = schema["paths"]
    base = "/api/v1/channels/{name}/tasks/"
    assert set(paths[base]) == {"get", "post"}
    assert set(paths[base + "{task_id}/"]) == {"get", "patch"}
    for action in ("claim", "renew", "done", "block", "release", "recover"):
        assert set(paths[f"{base}{{task_id}}/{action}/"]) == {"post"}
    assert (
        "LEASE_TRANSACTION_NOT_FOUND"
        in (paths[base + "recover-pending/"]["post"]["responses"]["409"]["description"])
    )
    claim = paths[base + "{task_id}/claim/"]["post"]["responses"]
    assert "LEASE_CONFLICT" in claim["409"]["description"]
    assert "LEASE_INVALID_DURATION" in claim["400"]["description"]
