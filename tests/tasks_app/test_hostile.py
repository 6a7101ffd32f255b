"""Hostile input on the task and lease endpoints and their parsers: every string field with a
line separator or control character, a lone surrogate, a trailing newline, look-alike digits or
an enormous value gets a clean 4xx with its stable code and changes nothing.

Through the API the JSON layer refuses lone surrogates and NUL anywhere (INVALID_TEXT) before
any view runs; the inputs' parsers (``tasks_app.api.serializers``) and the checks the admin and
the folder import parse with (``tasks_app.services.validation``) refuse them again with the
field's own code, since a value may reach them without the JSON layer."""

from __future__ import annotations

import json

import pytest

from agentchat.core.rules.errors import AppError
from channels_app.selectors import channel_get
from tasks_app import services
from tasks_app.api.serializers import LeaseRecoverInput, TaskCreateInput, TaskUpdateInput
from tasks_app.services.validation import reason_check
from tests.tasks_app.helpers import (
    FIVE_MINUTES,
    act,
    act_raw,
    acted,
    create,
    created,
    error,
    tasks_url,
    unchanged,
    update,
)

pytestmark = pytest.mark.django_db

# Line separators and C0/C1 controls a one-line field refuses (terminal escape injection into
# agents that print titles); the reference refused only CR, LF and NUL.
CONTROLS = ["\x0b", "\x0c", "\x85", "\u2028", "\u2029", "\x1c", "\x1b[31m", "\x7f", "\x9b"]
CONTROLS += ["\t", "\n", "\r", "x\n"]
LONE_SURROGATES = ["\ud800", "a\udfffb"]
# The one-line fields of a task request and the code each answers with.
LINE_FIELDS = [
    ("title", lambda v: v, "TASK_INVALID_TITLE"),
    ("branch", lambda v: v, "TASK_INVALID_BRANCH"),
    ("acceptance", lambda v: ["ok", v], "TASK_INVALID_ACCEPTANCE"),
]


def raw_create(client, body: str):
    return client.generic("POST", tasks_url(), body, content_type="application/json")


def raw_update(client, task_id: str, body: str):
    return client.generic("PATCH", tasks_url(task_id), body, content_type="application/json")


# --- one-line fields ---------------------------------------------------------------------------


@pytest.mark.parametrize("char", CONTROLS)
@pytest.mark.parametrize(("field", "shape", "code"), LINE_FIELDS, ids=[f[0] for f in LINE_FIELDS])
def test_one_line_fields_refuse_line_separators_and_controls(
    alice, backend, char, field, shape, code
):
    created(alice, "T")
    value = shape(f"a{char}b" if char != "x\n" else char)
    with unchanged():
        err = error(create(alice, "U", **{field: value}), 400, code)
        assert err["detail"]["field"] in {field, "acceptance item"}
        error(update(alice, "T", **{field: value}), 400, code)


# (U+200B and the other invisible format characters are refused:
# tests/core/rules/test_invisible_characters.py)
@pytest.mark.parametrize("text", ["Désign — schéma 😀", "\u00a0x", "tab-free"])
def test_one_line_fields_keep_ordinary_unicode(alice, backend, text):
    body = created(alice, "T", title=text, branch=text, acceptance=[text])
    assert (body["title"], body["branch"], body["acceptance"]) == (text, text, [text])


@pytest.mark.parametrize("char", CONTROLS)
def test_a_recovery_reason_refuses_line_separators_and_controls(
    bob, carol, backend, alice, clock, char
):
    created(alice, "T")
    acted(bob, "T", "claim", {"lease_seconds": 10})
    clock.advance(10)
    reason = f"gone{char}away" if char != "x\n" else "gone\n"
    with unchanged():
        err = error(act(carol, "T", "recover", {"reason": reason}), 400, "LEASE_INVALID_REASON")
    assert err["detail"]["field"] == "reason"


def test_a_recovery_reason_is_at_most_1000_characters(alice, bob, carol, backend, clock):
    created(alice, "T")
    acted(bob, "T", "claim", {"lease_seconds": 10})
    clock.advance(10)
    with unchanged():
        error(act(carol, "T", "recover", {"reason": "x" * 1001}), 400, "LEASE_INVALID_REASON")
    assert acted(carol, "T", "recover", {"reason": "x" * 1000})["owner"] == "carol"


# --- lone surrogates and NUL -----------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        '{"id": "T", "title": "\\ud800"}',
        '{"id": "T", "title": "x", "branch": "a\\udfffb"}',
        '{"id": "T", "title": "x", "acceptance": ["\\ud800"]}',
        '{"id": "T", "title": "x", "files_hint": ["src/\\ud800.py"]}',
        '{"id": "T", "title": "x", "depends_on": ["\\ud800"]}',
        '{"id": "\\ud800", "title": "x"}',
        '{"id": "T", "title": "x", "owner": "bob\\u0000"}',
        '{"id": "T", "title": "x", "\\ud800": 1}',
    ],
)
def test_the_json_layer_refuses_lone_surrogates_and_nul_in_a_create(alice, backend, body):
    with unchanged():
        error(raw_create(alice, body), 400, "INVALID_TEXT")


@pytest.mark.parametrize("action", ["claim", "renew", "recover"])
def test_the_json_layer_refuses_lone_surrogates_in_lease_bodies(alice, bob, backend, action):
    created(alice, "T")
    with unchanged():
        error(act_raw(bob, "T", action, '{"reason": "\\udc00"}'), 400, "INVALID_TEXT")


@pytest.mark.parametrize("text", [*LONE_SURROGATES, "nul\x00"])
@pytest.mark.parametrize(
    ("field", "shape", "code"),
    [
        *LINE_FIELDS,
        ("depends_on", lambda v: [v], "TASK_INVALID_DEPENDENCY_ID"),
        ("owner", lambda v: v, "TASK_INVALID_OWNER"),
    ],
    ids=["title", "branch", "acceptance", "depends_on", "owner"],
)
def test_parsers_refuse_lone_surrogates_and_nul_with_the_field_code(text, field, shape, code):
    # What a caller without the JSON layer would hand the parsers.
    for call in (
        lambda: TaskCreateInput.parse({"id": "U", "title": "x", field: shape(text)}),
        lambda: TaskUpdateInput.parse({field: shape(text)})[field].get(),
    ):
        with pytest.raises(AppError) as caught:
            call()
        assert caught.value.code == code
        json.dumps(caught.value.detail)  # the error itself can be rendered


@pytest.mark.parametrize("text", [*LONE_SURROGATES, "nul\x00", "a\x1bb"])
def test_parsers_and_services_refuse_bad_reasons_and_ids(alice, bob, backend, clock, text):
    channel = channel_get("backend", viewer="alice")
    created(alice, "T")
    acted(bob, "T", "claim", {"lease_seconds": 10})
    clock.advance(10)
    with unchanged():
        for call, code in [
            (lambda: LeaseRecoverInput.parse({"reason": text}), "LEASE_INVALID_REASON"),
            (lambda: reason_check(text), "LEASE_INVALID_REASON"),  # the admin's
            (lambda: TaskCreateInput.parse({"id": f"U{text}", "title": "x"}), "TASK_INVALID_ID"),
            (
                lambda: services.lease_claim(
                    channel=channel, task_id=f"T{text}", actor="bob", duration=FIVE_MINUTES
                ),
                "TASK_INVALID_ID",
            ),
        ]:
            with pytest.raises(AppError) as caught:
                call()
            assert caught.value.code == code


# --- names and ids: trailing newlines, look-alike characters ----------------------------------


@pytest.mark.parametrize(
    "owner", ["alice\n", "alice\r\n", " alice", "\uff41lice", "alice\u200b", "Alice"]
)
def test_a_task_assigned_to_a_name_that_is_no_agent_name_is_refused(alice, backend, owner):
    created(alice, "T")
    with unchanged():
        error(create(alice, "U", owner=owner), 400, "TASK_INVALID_OWNER")
        error(update(alice, "T", owner=owner), 400, "TASK_INVALID_OWNER")


@pytest.mark.parametrize("task_id", ["T-1\n", "T-\u0661", "T-\uff11", "\u0422-1", "T 1"])
def test_ids_with_trailing_newlines_or_look_alike_characters_are_refused(alice, backend, task_id):
    created(alice, "A")
    with unchanged():
        error(create(alice, task_id), 400, "TASK_INVALID_ID")
        error(create(alice, "U", depends_on=[task_id]), 400, "TASK_INVALID_DEPENDENCY_ID")


@pytest.mark.parametrize("segment", ["T%0A", "T%00", "T-%D9%A1", "%ED%A0%80", "T%E2%80%A8"])
def test_ids_in_the_path_with_controls_or_look_alikes_are_refused(alice, backend, segment):
    created(alice, "T")
    with unchanged():
        for response in (
            alice.get(f"/api/v1/channels/backend/tasks/{segment}/"),
            alice.post(f"/api/v1/channels/backend/tasks/{segment}/claim/", {}, format="json"),
        ):
            error(response, 400, "TASK_INVALID_ID")


@pytest.mark.parametrize("status", ["open\n", "OPEN", "\uff4fpen", "in_progress "])
def test_a_status_with_a_trailing_newline_or_look_alike_is_refused(alice, backend, status):
    created(alice, "T")
    with unchanged():
        err = error(update(alice, "T", status=status), 400, "TASK_INVALID_STATUS")
    assert err["detail"]["field"] == "status"


@pytest.mark.parametrize("query", ["owner=bob%00", "owner=bob%0A", "owner=%ED%A0%80", "owner=Bob"])
def test_list_filters_with_bad_owners_are_refused(alice, backend, query):
    created(alice, "T", owner="bob")
    error(alice.get(tasks_url() + "?" + query), 400, "TASK_INVALID_OWNER")


@pytest.mark.parametrize("query", ["status=open%00", "status=open%0A", "status=" + "x" * 5000])
def test_list_filters_with_bad_statuses_are_refused(alice, backend, query):
    created(alice, "T")
    err = error(alice.get(tasks_url() + "?" + query), 400, "TASK_INVALID_STATUS")
    assert len(json.dumps(err)) < 1000  # the echo of the value is bounded


@pytest.mark.parametrize("raw", ['"\\u0663"', '"٣"', '"3"', '"1e3"', "1" + "0" * 5000])
def test_look_alike_and_huge_numbers_for_lease_seconds_are_refused(alice, bob, backend, raw):
    created(alice, "T")
    with unchanged():
        response = act_raw(bob, "T", "claim", f'{{"lease_seconds": {raw}}}')
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] in {"LEASE_INVALID_DURATION", "INVALID_JSON"}


# --- enormous values ---------------------------------------------------------------------------


def test_enormous_ids_are_refused_and_not_echoed_whole(alice, backend):
    with unchanged():
        err = error(create(alice, "T" * 100_000), 400, "TASK_INVALID_ID")
        assert len(json.dumps(err)) < 1000
        err = error(alice.get(tasks_url("T" * 5000)), 400, "TASK_INVALID_ID")
        assert len(json.dumps(err)) < 1000


@pytest.mark.parametrize("field", ["title", "branch"])
def test_enormous_text_fields_are_refused(alice, backend, field):
    with unchanged():
        error(create(alice, "T", **{field: "x" * (600 * 1024)}), 413, "FIELD_TOO_LARGE")
        error(create(alice, "T", **{field: "x" * (800 * 1024)}), 413, "REQUEST_TOO_LARGE")


@pytest.mark.parametrize(
    ("field", "item", "code"),
    [
        ("acceptance", "a", "TASK_INVALID_ACCEPTANCE"),
        ("files_hint", "a", "TASK_INVALID_FILES_HINT"),
        ("depends_on", None, "TASK_INVALID_DEPENDS_ON"),
    ],
)
def test_lists_hold_at_most_1000_items(alice, backend, field, item, code):
    created(alice, "A")
    items = [item or f"D{i}" for i in range(1001)]
    with unchanged():
        err = error(create(alice, "T", **{field: items}), 400, code)
    assert err["detail"] == {"field": field, "max_items": 1000}
    if item is not None:
        assert len(created(alice, "T", **{field: items[:1000]})[field]) == 1000


# --- files_hint: the lock path rules -----------------------------------------------------------

# Refused by the workspace path rules that lock paths follow (the reference would take them).
BAD_HINTS = [
    "\uff0e\uff0e/x",  # full-width dots: ".." under NFKC
    "\u2025/x",  # two-dot leader
    "a\uff0fb",  # full-width solidus
    "%2e%2e/x",
    "src/%41.py",
    "a\x1bb",
    "a\tb",
    "a\x85b",
    "\u202eevil.py",  # bidi override
    "src/a\u200b.py",  # zero width space: shows as src/a.py
    "src/a\ufeff.py",
    "src/a\u00ad.py",
    "src/\u3164.py",  # hangul filler: blank-looking
    "CON",
    "docs/aux.txt",
    "dir./x",
    "x ",
    "a\\b",
    "x" * 1100,
    "/".join(["a"] * 200),
]
# Refused with the reference's own code for files_hint.
OUTSIDE_HINTS = ["../x", "a/../../x", "/etc/passwd", "C:\\x", "C:x", "a:b", "", "..\\x", 5, None]


@pytest.mark.parametrize("path", BAD_HINTS)
def test_files_hint_refuses_what_lock_paths_refuse(alice, backend, path):
    created(alice, "T")
    with unchanged():
        err = error(create(alice, "U", files_hint=["ok.py", path]), 400, "TASK_INVALID_FILES_HINT")
        assert err["detail"]["field"] == "files_hint"
        assert len(json.dumps(err)) < 2000
        error(update(alice, "T", files_hint=[path]), 400, "TASK_INVALID_FILES_HINT")


@pytest.mark.parametrize("path", OUTSIDE_HINTS)
def test_files_hint_outside_the_workspace_keeps_the_references_code(alice, backend, path):
    with unchanged():
        error(create(alice, "U", files_hint=[path]), 400, "TASK_PATH_OUTSIDE_WORKSPACE")


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("\ud800.py", "TASK_INVALID_FILES_HINT"),
        ("src/a\udfff", "TASK_INVALID_FILES_HINT"),
        ("a\x00", "TASK_PATH_OUTSIDE_WORKSPACE"),
    ],
)
def test_files_hint_refuses_lone_surrogates_and_nul_in_the_parser(path, code):
    with pytest.raises(AppError) as caught:
        TaskCreateInput.parse({"id": "U", "title": "x", "files_hint": [path]})
    assert caught.value.code == code
    json.dumps(caught.value.detail)


def test_files_hint_keeps_valid_paths_as_written(alice, backend):
    hints = ["./src//a.py", "docs/", "src/\u00e9.py", "report[1].txt", "a b/c.py", "."]
    assert created(alice, "T", files_hint=hints)["files_hint"] == hints
