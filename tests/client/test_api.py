"""The client's shared layer: configuration precedence, the HTTP client's answers and errors,
and the exit families equal to the server's one table."""

from __future__ import annotations

import json

import httpx
import pytest

from agentchat.client.api import Client
from agentchat.client.config import DEFAULT_URL, config_load
from agentchat.client.errors import CLIENT_CODES, ClientError, exit_family
from agentchat.core.rules.errors import ERRORS


def test_every_server_code_has_the_servers_exit_family():
    assert {code: exit_family(code) for code in ERRORS} == {
        code: spec.exit for code, spec in ERRORS.items()
    }


def test_client_codes_do_not_shadow_server_codes():
    assert set(CLIENT_CODES) & set(ERRORS) == set()


def test_flag_beats_env_beats_file_beats_default(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('url = "http://file:1"\ntoken = "file-token"\n')
    env = {"AGENT_CHAT_CONFIG": str(path)}
    assert config_load(env=env).url == "http://file:1"
    assert config_load(env=env).token == "file-token"
    env |= {"AGENT_CHAT_URL": "http://env:2/", "AGENT_CHAT_TOKEN": "env-token"}
    got = config_load(env=env)
    assert (got.url, got.token) == ("http://env:2", "env-token")
    got = config_load(url="http://flag:3", token="flag-token", env=env)
    assert (got.url, got.token) == ("http://flag:3", "flag-token")
    assert got.sources == {"url": "--url", "token": "--token"}
    got = config_load(env={"HOME": str(tmp_path)})
    assert (got.url, got.token, got.path) == (DEFAULT_URL, None, None)


def test_the_default_file_is_under_the_users_config_dir(tmp_path):
    (tmp_path / "agentchat").mkdir()
    (tmp_path / "agentchat" / "config.toml").write_text('token = "t"\n')
    got = config_load(env={"XDG_CONFIG_HOME": str(tmp_path)})
    assert got.token == "t"
    assert got.sources["token"] == f"token in {tmp_path / 'agentchat' / 'config.toml'}"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("url = [", "is not TOML"),
        ('tokn = "x"', "unknown key 'tokn'"),
        ("url = 3", "'url' must be a str"),
        ('url = "ftp://x"', "is not http(s)://host"),
        ('url = "http://x/?a=1"', "is not http(s)://host"),
        ('token = "a b"', "not printable ASCII"),
    ],
)
def test_a_bad_config_file_is_refused_naming_it(tmp_path, text, fragment):
    path = tmp_path / "c.toml"
    path.write_text(text)
    with pytest.raises(ClientError) as caught:
        config_load(env={"AGENT_CHAT_CONFIG": str(path)})
    assert caught.value.code == "CONFIG_INVALID"
    assert fragment in caught.value.message
    assert caught.value.exit_code == 1


def test_a_named_config_file_must_exist(tmp_path):
    with pytest.raises(ClientError) as caught:
        config_load(env={"AGENT_CHAT_CONFIG": str(tmp_path / "none.toml")})
    assert caught.value.code == "CONFIG_INVALID"
    assert "none.toml" in caught.value.message


def _client(handler) -> Client:
    return Client("http://server:9", "tok", transport=httpx.MockTransport(handler))


def test_request_sends_the_token_and_returns_the_json_body():
    seen = {}

    def handler(request: httpx.Request) -> httpx.Response:
        seen["auth"] = request.headers["authorization"]
        seen["url"] = str(request.url)
        seen["body"] = json.loads(request.content)
        return httpx.Response(201, json={"seq": 1})

    with _client(handler) as client:
        got = client.request("POST", "channels/x/messages/", json={"title": "é"}, params={"a": 1})
    assert got == {"seq": 1}
    assert seen == {
        "auth": "Bearer tok",
        "url": "http://server:9/api/v1/channels/x/messages/?a=1",
        "body": {"title": "é"},
    }


def test_an_error_body_becomes_a_client_error_with_its_family():
    def handler(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "LEASE_CONFLICT", "message": "held", "detail": {"o": "bob"}}}
        return httpx.Response(409, json=body)

    with _client(handler) as client, pytest.raises(ClientError) as caught:
        client.request("POST", "channels/x/tasks/t/claim/")
    error = caught.value
    assert (error.code, error.message, error.detail, error.exit_code, error.status) == (
        "LEASE_CONFLICT",
        "held",
        {"o": "bob"},
        2,
        409,
    )
    assert error.line() == "agentchat: LEASE_CONFLICT: held"


def test_bad_token_and_unknown_channel_say_what_to_do():
    def handler(request: httpx.Request) -> httpx.Response:
        code = "AUTH_INVALID" if "channels/" not in request.url.path else "CHANNEL_NOT_FOUND"
        status = 401 if code == "AUTH_INVALID" else 404
        return httpx.Response(status, json={"error": {"code": code, "message": "no"}})

    with _client(handler) as client:
        with pytest.raises(ClientError) as caught:
            client.request("GET", "/api/v1/")
        assert "create_agent_token" in caught.value.message
        with pytest.raises(ClientError) as caught:
            client.request("GET", "channels/nope/")
        assert "agentchat init" in caught.value.message


def test_an_answer_that_is_no_agentchat_body_is_a_bad_response():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(502, text="<html>bad gateway</html>")

    with _client(handler) as client, pytest.raises(ClientError) as caught:
        client.request("GET", "channels/")
    assert (caught.value.code, caught.value.transient, caught.value.exit_code) == (
        "BAD_RESPONSE",
        True,
        1,
    )


def test_no_server_names_the_url_and_how_to_start_one():
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused")

    with _client(handler) as client, pytest.raises(ClientError) as caught:
        client.request("GET", "channels/")
    error = caught.value
    assert error.code == "SERVER_UNREACHABLE" and error.transient and error.exit_code == 1
    assert "http://server:9" in error.message and "make run" in error.message
    assert "\n" not in error.line()


def test_a_lone_surrogate_is_refused_before_sending():
    def handler(request: httpx.Request) -> httpx.Response:
        raise AssertionError("sent")

    with _client(handler) as client, pytest.raises(ClientError) as caught:
        client.request("POST", "channels/x/messages/", json={"title": "\udc80"})
    assert caught.value.code == "INVALID_TEXT"


def test_text_answers_are_returned_as_text():
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text="# State", headers={"content-type": "text/markdown"})

    with _client(handler) as client:
        assert client.request("GET", "channels/x/state/", accept="text/markdown") == "# State"


@pytest.mark.parametrize(
    ("status", "headers", "text", "fragment"),
    [
        (302, {"location": "http://elsewhere/login/"}, "", "HTTP 302 (a redirect to http"),
        (301, {}, "moved", "HTTP 301 (a redirect)"),
        (200, {"content-type": "text/html"}, "<html>login</html>", "text/html, not JSON"),
        (200, {}, "ok", "no content type, not JSON"),
    ],
)
def test_a_redirect_or_a_non_json_answer_is_a_bad_response(status, headers, text, fragment):
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, content=text.encode(), headers=headers)

    for raw in (False, True):
        with _client(handler) as client, pytest.raises(ClientError) as caught:
            client.request("GET", "me/", raw=raw)
        assert (caught.value.code, caught.value.status) == ("BAD_RESPONSE", status)
        assert fragment in caught.value.message
