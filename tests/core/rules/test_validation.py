"""The one parsing layer: text, JSON values, integers and names, as every surface sees them."""

from __future__ import annotations

import json

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name, check_channel_name, is_record_id
from agentchat.core.rules.validation import (
    MAX_JSON_DEPTH,
    int_parse,
    json_loads_strict,
    json_value_check,
    number_parse,
    text_check,
)
from channels_app.models import Channel, MarkerClaim, Message
from tests.errors import error_code as error_of

# Every line separator and C0/C1 control that a one-line field must refuse (terminal escape
# injection into agents that print titles), and characters that are fine.
CONTROLS = ["\t", "\n", "\r", "\x0b", "\x0c", "\x1b", "\x1c", "\x7f", "\x85", "\x9b", "\u2028"]
CONTROLS += ["\u2029", "\x00"]
LONE_SURROGATES = ["\ud800", "\udfff", "a\udc00b"]


def code_of(call) -> str:
    with pytest.raises(AppError) as info:
        call()
    return info.value.code


# --- unit: the helpers -------------------------------------------------------------------------


@pytest.mark.parametrize("char", CONTROLS)
def test_one_line_text_refuses_every_control_and_line_separator(char):
    assert code_of(lambda: text_check(f"a{char}b", field="t", single_line=True)) == "INVALID_VALUE"


@pytest.mark.parametrize("text", ["plain", "émoji 😀", "\u00a0x"])
def test_one_line_text_accepts_ordinary_unicode(text):
    assert text_check(text, field="t", single_line=True) == text


@pytest.mark.parametrize("text", ["two\nlines\r\n", "tab\there"])
def test_multi_line_text_keeps_newlines_and_tabs(text):
    assert text_check(text, field="body") == text


@pytest.mark.parametrize("text", [*LONE_SURROGATES, "nul\x00"])
def test_no_text_may_hold_a_lone_surrogate_or_nul(text):
    assert code_of(lambda: text_check(text, field="body", code="TASK_INVALID_TITLE")) == (
        "TASK_INVALID_TITLE"
    )


def test_text_check_limits():
    assert code_of(lambda: text_check(5, field="t")) == "INVALID_VALUE"
    assert code_of(lambda: text_check(" ", field="t", allow_empty=False)) == "INVALID_VALUE"
    assert code_of(lambda: text_check("abc", field="t", max_chars=2)) == "INVALID_VALUE"
    assert code_of(lambda: text_check("x" * (512 * 1024 + 1), field="t")) == "FIELD_TOO_LARGE"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": "\ud800"}, "data.a"),
        ({"\ud800": 1}, "data"),
        ({"a": [1, {"b": "x\x00"}]}, "data.a[1].b"),
        (["ok", "\udfff"], "data[1]"),
    ],
)
def test_json_values_are_checked_everywhere_with_the_path(value, path):
    with pytest.raises(AppError) as info:
        json_value_check(value, field="data")
    assert (info.value.code, info.value.detail["field"]) == ("INVALID_VALUE", path)


def test_json_values_refuse_non_finite_numbers_and_deep_nesting():
    assert code_of(lambda: json_value_check({"a": float("nan")}, field="d")) == "INVALID_TYPE"
    deep: list = []
    for _ in range(MAX_JSON_DEPTH):
        deep = [deep]
    assert code_of(lambda: json_value_check(deep, field="d")) == "JSON_TOO_DEEP"
    json_value_check(deep[0], field="d")  # exactly the limit is fine


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"a": "\\ud800"}', "INVALID_TEXT"),
        (b'{"\\udfff": 1}', "INVALID_TEXT"),
        (b'{"a": {"b": ["\\u0000"]}}', "INVALID_TEXT"),
        (b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1), "JSON_TOO_DEEP"),
        (b"[" * 980 + b"]" * 980, "JSON_TOO_DEEP"),
        (b'{"a": 1, "a": 2}', "INVALID_JSON"),
        (b"\xed\xa0\x80", "INVALID_JSON"),  # a surrogate encoded as UTF-8 is not UTF-8
    ],
)
def test_request_bodies_refuse_what_no_string_may_hold(body, code):
    assert code_of(lambda: json_loads_strict(body)) == code


def test_request_bodies_keep_escaped_pairs_and_brackets_in_strings():
    assert json_loads_strict(b'{"a": "\\ud83d\\ude00"}') == {"a": "\U0001f600"}
    text = "[" * 500
    assert json_loads_strict(json.dumps({"a": text}).encode()) == {"a": text}
    nested: list = []
    for _ in range(MAX_JSON_DEPTH - 2):
        nested = [nested]  # MAX_JSON_DEPTH - 1 lists, inside the object: exactly the limit
    assert json_loads_strict(json.dumps({"a": nested}).encode()) == {"a": nested}


@pytest.mark.parametrize(
    "raw", ["²", "٣", "1٣", "-1", "+1", " 1", "1 ", "1\n", "1.0", "0x1", "1_0", "9" * 4300]
)
def test_integers_are_ascii_digits_within_bounds(raw):
    assert code_of(lambda: int_parse(raw, field="after", code="INVALID_SEQ")) == "INVALID_SEQ"


def test_integer_parse_bounds_and_default():
    assert int_parse(None, field="x", code="INVALID_SEQ", default=7) == 7
    assert int_parse("", field="x", code="INVALID_SEQ", default=7) == 7
    assert int_parse("0042", field="x", code="INVALID_SEQ") == 42
    assert code_of(lambda: int_parse("5", field="x", code="INVALID_SEQ", maximum=4)) == (
        "INVALID_SEQ"
    )
    assert code_of(lambda: int_parse("0", field="x", code="INVALID_SEQ", minimum=1)) == (
        "INVALID_SEQ"
    )


@pytest.mark.parametrize(
    "raw", ["١٢", "1_0", "nan", "inf", " 5", "5\n", "-1", ".", "1e", "e3", "1e+", "1e999", "1.5.2"]
)
def test_numbers_are_ascii_decimals(raw):
    assert code_of(lambda: number_parse(raw, field="timeout", code="INVALID_TIMEOUT")) == (
        "INVALID_TIMEOUT"
    )


def test_number_parse_accepts_decimals():
    assert number_parse("12.5", field="t", code="INVALID_TIMEOUT") == 12.5
    assert number_parse("0", field="t", code="INVALID_TIMEOUT") == 0.0


@pytest.mark.parametrize("value", [0.2754364421974968, 1e-05, 5e-324, 1e3, 899.9999999999999])
def test_number_parse_takes_what_a_float_prints(value):
    # A schema-generated client sends repr(float): schemathesis found 0.2754364421974968 refused
    # (at most 9 fraction digits were taken) for a wait timeout that the schema allows.
    for raw in (repr(value), str(value), json.dumps(value)):
        assert number_parse(raw, field="t", code="INVALID_TIMEOUT", maximum=10**6) == value


@pytest.mark.parametrize("name", ["alice\n", "alice\r\n", "\nalice", "alice\x00"])
def test_agent_names_match_the_whole_string(name):
    assert code_of(lambda: check_agent_name(name)) == "INVALID_NAME"


@pytest.mark.parametrize("name", ["review\n", "m1\n"])
def test_record_ids_match_the_whole_string(name):
    assert not is_record_id(name, max_length=128)


@pytest.mark.parametrize(
    "name",
    ["CON", "con", "Con.txt", "nul.md", "COM1", "lpt9.x", "x.", "a..", "STATE.MD", "state.md"],
)
def test_channel_names_a_synced_folder_cannot_hold_are_refused(name):
    assert code_of(lambda: check_channel_name(name)) == "INVALID_NAME"


@pytest.mark.parametrize("name", ["console", "conx", "com10", "state", "x.y", "review"])
def test_channel_names_near_the_reserved_ones_are_fine(name):
    assert check_channel_name(name) == name


# --- through the API ---------------------------------------------------------------------------


@pytest.fixture
def review(alice):
    r = alice.post("/api/v1/channels/", {"name": "review"}, format="json")
    assert r.status_code == 201, r.content
    return r.json()


def post_raw(client, path: str, body: bytes):
    return client.generic("POST", path, body, content_type="application/json")


@pytest.mark.django_db
@pytest.mark.parametrize("char", CONTROLS)
@pytest.mark.parametrize("field", ["title", "status", "conversation_id", "correlation_id", "id"])
def test_one_line_message_fields_refuse_controls(alice, review, field, char):
    body = {"title": "ok", field: f"a{char}b"}
    r = alice.post("/api/v1/channels/review/messages/", body, format="json")
    assert error_of(r) in {"INVALID_VALUE", "INVALID_TEXT"}
    assert Message.objects.count() == 0


@pytest.mark.django_db
@pytest.mark.parametrize(
    "body",
    [
        b'{"title": "x", "data": {"\\ud800": 1}}',
        b'{"title": "x", "data": {"a": ["\\udfff"]}}',
        b'{"title": "x", "metadata": {"\\ud800": "v"}}',
        b'{"title": "x", "metadata": {"k": "\\u0000"}}',
        b'{"title": "x\\ud800"}',
        b'{"title": "x", "body": "\\udc00"}',
    ],
)
def test_poisoned_text_is_refused_and_nothing_is_stored(alice, review, body):
    r = post_raw(alice, "/api/v1/channels/review/messages/", body)
    assert error_of(r) == "INVALID_TEXT"
    assert Message.objects.count() == 0
    assert Channel.objects.get(name="review").last_seq == 0


@pytest.mark.django_db
def test_deep_data_is_refused_and_the_limit_is_accepted(alice, review):
    deep: list = []
    for _ in range(MAX_JSON_DEPTH - 1):
        deep = [deep]  # MAX_JSON_DEPTH lists: with the body's object, one level too deep
    body = json.dumps({"title": "x", "data": deep}).encode()
    assert error_of(post_raw(alice, "/api/v1/channels/review/messages/", body)) == "JSON_TOO_DEEP"
    body = json.dumps({"title": "x", "data": deep[0]}).encode()
    r = post_raw(alice, "/api/v1/channels/review/messages/", body)
    assert r.status_code == 201, r.content
    assert alice.get("/api/v1/channels/review/messages/").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "query", ["after=²", "after=٣", "limit=٣", "after=" + "9" * 4300, "limit=1%0A", "after=-1"]
)
def test_integer_query_parameters_are_ascii_digits(alice, review, query):
    r = alice.get(f"/api/v1/channels/review/messages/?{query}")
    assert error_of(r) in {"INVALID_SEQ", "INVALID_VALUE"}


@pytest.mark.django_db
@pytest.mark.parametrize("name", ["review\n", "CON", "x.", "STATE.MD", "nul.txt"])
def test_channel_names_with_a_newline_or_reserved_are_refused(alice, name):
    r = alice.post("/api/v1/channels/", {"name": name}, format="json")
    assert error_of(r) == "INVALID_NAME"
    assert not Channel.objects.exists()


@pytest.mark.django_db
def test_recipients_with_a_trailing_newline_are_refused(alice, review):
    r = alice.post(
        "/api/v1/channels/review/messages/", {"title": "x", "to": ["bob\n"]}, format="json"
    )
    assert error_of(r) == "INVALID_NAME"
    assert Message.objects.count() == 0


@pytest.mark.django_db
def test_marker_with_a_trailing_newline_is_refused(alice, review):
    r = alice.post("/api/v1/channels/review/claims/m1%0A/", {}, format="json")
    assert error_of(r) == "INVALID_NAME"
    assert not MarkerClaim.objects.exists()


@pytest.mark.parametrize(
    "name", ["alice..x", ".alice", "alice.", "a..b..c", "a.b..c", "..", "a..."]
)
def test_agent_names_have_no_empty_dot_segment(name):
    import re

    from agentchat.core.rules.names import AGENT_NAME_PATTERN

    assert code_of(lambda: check_agent_name(name)) == "INVALID_NAME"
    assert re.search(AGENT_NAME_PATTERN, name) is None  # the OpenAPI document's rule too


@pytest.mark.parametrize("name", ["alice.x", "a.b.c", "a-.b", "a_.-b", "a"])
def test_agent_names_with_dots_between_segments_are_fine(name):
    assert check_agent_name(name) == name


def test_a_person_whose_username_has_dots_in_a_row_gets_one_dot():
    from agentchat.core.identity.humans import human_name

    assert human_name("Ann..Lee", user_id=7) == "ann.lee"
    assert human_name("...", user_id=7) == "user-7"


def test_channel_names_keep_the_record_id_rule():
    assert check_channel_name("a..b") == "a..b"  # a folder the reference may hold
