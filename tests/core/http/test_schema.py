"""The OpenAPI document tells the truth: error responses from the one error table, the rules of
every field as patterns that agree with the validators, public schema and docs pages."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema_rs
import pytest
from django.urls import resolve
from hypothesis import given, settings
from hypothesis import strategies as st

from agentchat.core.http import lane, schema
from agentchat.core.rules import names
from agentchat.core.rules.errors import ERRORS, UndeclaredErrorCode
from agentchat.core.rules.paths import workspace_path_normalize
from agentchat.core.rules.validation import text_problem
from tests.schemathesis.hooks import path_breaks_unwritten_rule

METHODS = ("get", "post", "put", "patch", "delete")


@pytest.fixture
def document(api_client: Any) -> dict[str, Any]:
    r = api_client.get("/api/v1/schema/?format=json")
    assert r.status_code == 200
    return json.loads(r.content)


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (path, method, item[method])
        for path, item in document["paths"].items()
        for method in METHODS
        if method in item
    ]


def test_every_operation_documents_its_error_codes_by_status_from_the_table(document):
    found = operations(document)
    assert len(found) >= 28
    for path, method, operation in found:
        codes = operation["x-error-codes"]
        # the common codes, once for all
        for code in ("AUTH_REQUIRED", "AUTH_INVALID", "METHOD_NOT_ALLOWED", "NOT_ACCEPTABLE"):
            assert code in codes, (path, method)
        if "/channels/{name}/" in path:
            assert "CHANNEL_NOT_FOUND" in codes
        if method in ("post", "patch"):
            assert {"INVALID_JSON", "INVALID_TEXT", "UNSUPPORTED_MEDIA_TYPE"} <= set(codes)
        errors = {status: r for status, r in operation["responses"].items() if status >= "400"}
        # one response per status the codes have, and nothing else
        assert set(errors) == {str(ERRORS[code].status) for code in codes}, (path, method)
        for status, response in errors.items():
            group = [code for code in codes if str(ERRORS[code].status) == status]
            lines = [f"- `{code}`: {ERRORS[code].meaning}" for code in group]
            assert response["description"] == "\n".join(lines)
            body = response["content"]["application/json"]["schema"]["allOf"]
            assert body[0] == {"$ref": "#/components/schemas/Error"}
            assert body[1]["properties"]["error"]["properties"]["code"]["enum"] == group


def test_every_heavy_operation_and_only_those_document_the_gate_and_the_budget(document):
    # The lane's rule decides (HEAD is GET): the view the route resolves to is heavy.
    heavy = set()
    for path, method, operation in operations(document):
        if path.endswith("/wait/"):
            continue  # the live long-poll: no DRF view, never heavy
        match = resolve(re.sub(r"\{[^}]+\}", "c", path))
        codes = set(operation["x-error-codes"])
        if lane.is_heavy(match, method.upper()):
            heavy.add((method, path))
            assert {"HEAVY_REQUEST_BUSY", "WORK_BUDGET_EXCEEDED"} <= codes, (path, method)
            assert {"429", "503"} <= set(operation["responses"]), (path, method)
        else:
            assert not {"HEAVY_REQUEST_BUSY", "WORK_BUDGET_EXCEEDED"} & codes, (path, method)
    assert {
        ("get", "/api/v1/channels/{name}/state/"),
        ("post", "/api/v1/channels/{name}/compact/"),
        ("get", "/api/v1/channels/{name}/messages/"),
        ("get", "/api/v1/channels/{name}/events/"),
        ("get", "/api/v1/channels/{name}/presence/"),
        ("get", "/api/v1/approvals/"),
        ("get", "/api/v1/channels/"),
        ("get", "/api/v1/channels/{name}/tasks/"),
        ("get", "/api/v1/channels/{name}/locks/"),
        ("post", "/api/v1/channels/{name}/locks/check/"),
        ("get", "/api/v1/search/"),
    } <= heavy
    assert ("post", "/api/v1/channels/{name}/messages/") not in heavy


def test_operations_declare_what_their_views_raise(document):
    by_id = {op["operationId"]: op["x-error-codes"] for _, _, op in operations(document)}
    assert "MARKER_ALREADY_CLAIMED" in by_id["markers_claim"]
    assert {"TASK_NOT_FOUND", "LEASE_CONFLICT", "LEASE_INVALID_DURATION"} <= set(
        by_id["task_claim"]
    )
    assert "PATH_LOCK_CONFLICT" in by_id["locks_check"]
    assert {"INVALID_TIMEOUT", "CHANNEL_NOT_FOUND"} <= set(by_id["channels_wait"])
    # a GET parses no body
    assert "INVALID_JSON" not in by_id["channels_list"]


def test_a_code_outside_the_table_cannot_be_declared():
    with pytest.raises(UndeclaredErrorCode):
        schema.raises("NO_SUCH_CODE")
    assert schema.raises("TASK_NOT_FOUND") == {"x-error-codes": ["TASK_NOT_FOUND"]}


def test_the_meaning_in_the_docs_follows_the_table(monkeypatch):
    monkeypatch.setitem(ERRORS, "TASK_NOT_FOUND", ERRORS["TASK_NOT_FOUND"].__class__(
        "TASK_NOT_FOUND", 404, 2, "changed meaning"))  # fmt: skip
    responses = schema.error_responses(["TASK_NOT_FOUND", "NOT_FOUND"])
    assert responses["404"]["description"].startswith("- `TASK_NOT_FOUND`: changed meaning\n")


def test_success_statuses_are_the_ones_the_views_answer(document):
    paths = document["paths"]
    assert set(paths["/api/v1/channels/{name}/claims/{marker}/"]["post"]["responses"]) >= {"201"}
    assert "200" not in paths["/api/v1/channels/{name}/claims/{marker}/"]["post"]["responses"]
    for path in ("/api/v1/channels/{name}/locks/", "/api/v1/channels/{name}/locks/{lock_id}/"):
        responses = paths[path]["delete"]["responses"]
        assert "200" in responses
        assert "204" not in responses


def test_path_parameters_and_bodies_carry_their_rules(document):
    for path, _, operation in operations(document):
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                assert parameter["schema"] == schema.PATH_PARAMETERS[parameter["name"]], path
    components = document["components"]["schemas"]
    update = components["PatchedTaskUpdateInputRequest"]
    assert update["additionalProperties"] is False
    assert len(update["anyOf"]) == 9  # at least one change
    body = document["paths"]["/api/v1/channels/{name}/tasks/{task_id}/"]["patch"]["requestBody"]
    assert body["required"] is True
    message = components["MessagePostInputRequest"]["properties"]
    assert message["title"]["pattern"] == schema.NON_BLANK_ONE_LINE_PATTERN
    assert message["title"]["maxLength"] == 1000
    assert message["body"]["pattern"] == schema.TEXT_PATTERN
    claim = components["LeaseDurationInputRequest"]["properties"]["lease_seconds"]
    assert claim == {**schema.lease_seconds(), "description": claim["description"]}
    assert "nullable" not in claim
    assert components["TaskCreateInputRequest"]["properties"]["owner"]["nullable"] is True


def test_the_wait_timeout_is_bounded_by_the_setting(document):
    wait = document["paths"]["/api/v1/channels/{name}/wait/"]["get"]
    timeout = next(p for p in wait["parameters"] if p["name"] == "timeout")["schema"]
    from django.conf import settings as django_settings

    assert timeout["maximum"] == django_settings.AGENTCHAT_WAIT_MAX_TIMEOUT
    assert timeout["default"] <= timeout["maximum"]


# --- the patterns agree with the validators ---------------------------------------------------


def ecma(pattern: str) -> Any:
    """The pattern as OpenAPI tools judge it (ECMA-262; the engine schemathesis uses)."""
    return jsonschema_rs.validator_for({"type": "string", "pattern": pattern}).is_valid


TEXT = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ["", " ", "a\n", "\na", "a\u2028", "a\x85", "\xa0", "a\x1b[31m", "ok", "a\tb", "\x00"]
)


@settings(max_examples=300, deadline=None)
@given(TEXT)
def test_text_patterns_agree_with_text_problem(value):
    assert ecma(schema.TEXT_PATTERN)(value) == (text_problem(value) is None)
    one_line = text_problem(value, single_line=True) is None
    assert ecma(schema.ONE_LINE_PATTERN)(value) == one_line
    assert ecma(schema.NON_BLANK_ONE_LINE_PATTERN)(value) == (one_line and bool(value.strip()))


NAMES = st.from_regex(r"[A-Za-z0-9._$\n-]{0,8}", fullmatch=True) | st.sampled_from(
    ["CON", "con.txt", "Nul", "com1", "COM1.x", "lpt9", "console", "state.md", "STATE.MD",
     "state.mdx", "a.", "a..b", "review\n", "x" * 64, "x" * 65, "alice", "all", "a-b_c.d"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(NAMES)
def test_name_patterns_agree_with_the_name_rules(value):
    assert ecma(names.AGENT_NAME_PATTERN)(value) == names.is_agent_name(value)
    channel_ok = ecma(names.CHANNEL_NAME_PATTERN)(value) and len(value) <= 64
    try:
        names.check_channel_name(value)
    except Exception:
        assert not channel_ok
    else:
        assert channel_ok
    record_ok = ecma(names.RECORD_ID_PATTERN)(value) and len(value) <= 128
    assert record_ok == names.is_record_id(value, max_length=128)


PATHS = st.from_regex(r"[a.%2eE/ :\\\x01\u202e\uff0e]{1,8}", fullmatch=True) | st.sampled_from(
    ["src/a.py", "./src//a.py", ".", "docs/", "../x", "a/../b", "/abs", "C:x", "a:b", "a\\b",
     "%2e%2e/x", "a%41", "con", "src/CON.txt", "x/lpt1", "a.", "a /b", "\uff0e\uff0e/x",
     "x/\u2025", "a\u202eb", "*.md", "src/**", "a[!b]c"]
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(PATHS)
def test_the_path_pattern_refuses_only_what_the_path_rules_refuse(value):
    # The pattern states some of the rules; the rest (bytes, NFKC forms) are in the
    # description, and the schemathesis run tolerates a refusal for them only when
    # path_breaks_unwritten_rule says so: that function and the pattern together are the rules.
    from agentchat.core.rules.errors import AppError

    try:
        workspace_path_normalize(value, code="PATH_LOCK_INVALID_PATH")
        valid = True
    except AppError:
        valid = False
    matches = ecma(schema.WORKSPACE_PATH_PATTERN)(value)
    if not matches:
        assert not valid
    elif not valid:
        assert path_breaks_unwritten_rule(value), value
    else:
        assert not path_breaks_unwritten_rule(value), value


# --- public schema and docs -------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/api/v1/schema/", "/api/v1/docs/", "/api/v1/redoc/"])
@pytest.mark.parametrize("authorization", [None, "Bearer not-a-token", "Basic eA=="])
def test_the_schema_and_docs_pages_are_public(api_client, path, authorization):
    headers = {} if authorization is None else {"HTTP_AUTHORIZATION": authorization}
    r = api_client.get(path, **headers)
    assert r.status_code == 200, r.content[:300]


def test_the_api_itself_still_needs_a_token(api_client):
    r = api_client.get("/api/v1/channels/")
    assert r.status_code == 401
    assert r.json()["error"]["code"] == "AUTH_REQUIRED"
