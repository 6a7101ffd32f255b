"""The registry and the post budget under real concurrent clients, against real server
processes on the test database (SQLite by default, PostgreSQL with DATABASE_URL; two processes
share PostgreSQL and Redis)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from django.db import connection

from channels_app.models import Message
from tests.conftest import (
    ServerProcess,
    auth,
    redis_reachable,
    redis_url_for_tests,
    require_service,
)

FINISHING = 8
POSTERS = 50
LIMIT = 10


def together(urls: list[str], tokens: list[str], call) -> list[httpx.Response]:
    """``call(http, index)`` for every token at once, each on its own connection to
    ``urls[index % len(urls)]``, released together by a barrier."""
    barrier = threading.Barrier(len(tokens))

    def run(index: int) -> httpx.Response:
        base = urls[index % len(urls)]
        with httpx.Client(base_url=base, headers=auth(tokens[index]), timeout=60) as http:
            barrier.wait()
            return call(http, index)

    with ThreadPoolExecutor(len(tokens)) as pool:
        return list(pool.map(run, range(len(tokens))))


def test_agents_finishing_at_once_are_told_last_exactly_once(live, make_agent):
    tokens = [make_agent(f"worker{i}")[1] for i in range(FINISHING)]
    httpx.post(f"{live.url}/api/v1/channels/", json={"name": "sess"}, headers=auth(tokens[0]))
    for i, token in enumerate(tokens):
        r = httpx.post(
            f"{live.url}/api/v1/agents/register/",
            json={"agent": f"worker{i}", "harness": "script", "session": "sess"},
            headers=auth(token),
        )
        assert r.status_code == 201, r.text

    answers = together(
        [live.url], tokens, lambda http, _: http.post("/api/v1/agents/idle/", json={})
    )
    assert all(r.status_code == 200 for r in answers), [r.text for r in answers]
    bodies = [r.json() for r in answers]
    assert [b["last"] for b in bodies].count(True) == 1, bodies
    # One after the other: the k-th to finish saw the ones after it still active.
    assert sorted(b["others_active"] for b in bodies) == list(range(FINISHING)), bodies
    assert "database is locked" not in live.output()


def _limited_servers(count: int, env: dict[str, str]) -> list[ServerProcess]:
    return [
        ServerProcess(env={"AGENTCHAT_POST_RATE": f"{LIMIT}/hour", **env}) for _ in range(count)
    ]


def _post_together(urls: list[str], token: str) -> list[httpx.Response]:
    return together(
        urls,
        [token] * POSTERS,
        lambda http, i: http.post("/api/v1/channels/flood/messages/", json={"title": f"m{i}"}),
    )


def _assert_limited(answers: list[httpx.Response]) -> None:
    accepted = [r for r in answers if r.status_code == 201]
    refused = [r for r in answers if r.status_code != 201]
    assert len(accepted) == LIMIT, [r.text for r in answers if r.status_code not in (201, 429)]
    for r in refused:
        assert r.status_code == 429, r.text
        assert r.json()["error"]["code"] == "RATE_LIMITED"
        retry_after = r.headers["Retry-After"]
        assert retry_after.isdigit() and int(retry_after) >= 1
        assert r.json()["error"]["detail"]["retry_after"] == int(retry_after)
    assert Message.objects.filter(channel__name="flood", kind="message").count() == LIMIT


def test_fifty_concurrent_posts_against_a_limit_of_ten_accept_ten(transactional_db, make_agent):
    _, token = make_agent("flooder")
    _, reader = make_agent("reader")
    (server,) = _limited_servers(1, {})
    try:
        # Another agent makes the channel (a creation takes from its creator's budget): the
        # flooder's whole budget is left for the flood.
        r = httpx.post(
            f"{server.url}/api/v1/channels/", json={"name": "flood"}, headers=auth(reader)
        )
        assert r.status_code == 201, r.text
        _assert_limited(_post_together([server.url], token))
        # Reads are never limited, the spent agent's own included.
        for who in (token, reader):
            for path in ("channels/flood/messages/", "channels/flood/read/", "agents/"):
                method = httpx.post if path.endswith("read/") else httpx.get
                answer = method(f"{server.url}/api/v1/{path}", headers=auth(who))
                assert answer.status_code == 200, answer.text
        # Another agent has a budget of its own.
        other = httpx.post(
            f"{server.url}/api/v1/channels/flood/messages/",
            json={"title": "mine"},
            headers=auth(reader),
        )
        assert other.status_code == 201, other.text
    finally:
        server.stop()


def test_the_limit_holds_across_two_processes_sharing_postgresql_and_redis(
    transactional_db, make_agent
):
    if connection.vendor != "postgresql":
        # Two server processes share one database: the run on PostgreSQL (.ci/run) has this.
        pytest.skip("two processes share one PostgreSQL database (.ci/run runs this there)")
    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    _, token = make_agent("flooder")
    _, maker = make_agent("maker")
    servers = _limited_servers(2, {"REDIS_URL": url})
    try:
        r = httpx.post(
            f"{servers[0].url}/api/v1/channels/", json={"name": "flood"}, headers=auth(maker)
        )
        assert r.status_code == 201, r.text
        _assert_limited(_post_together([s.url for s in servers], token))
    finally:
        for server in servers:
            server.stop()
