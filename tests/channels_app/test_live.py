"""Real clients against a real daphne process: concurrency, wait, websockets, fan-out."""

from __future__ import annotations

import asyncio
import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import websockets
from django.db import connection

from agentchat.core.models import ApiToken
from channels_app.models import Channel, Message
from tests.conftest import auth, in_thread
from tests.signals import wait_until


def create_channel(live, token, name):
    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": name}, headers=auth(token))
    assert r.status_code == 201, r.text


def test_concurrent_posts_get_exactly_seqs_1_to_400(live, make_agent):
    tokens = [make_agent(f"poster{i}")[1] for i in range(8)]
    create_channel(live, tokens[0], "race")
    barrier = threading.Barrier(8)

    def worker(token):
        statuses, seqs = [], []
        with httpx.Client(base_url=live.url, headers=auth(token), timeout=60) as http:
            barrier.wait()
            for i in range(50):
                r = http.post("/api/v1/channels/race/messages/", json={"title": f"m{i}"})
                statuses.append(r.status_code)
                if r.status_code == 201:
                    seqs.append(r.json()["seq"])
        return statuses, seqs

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(worker, tokens))
    statuses = [s for st, _ in results for s in st]
    seqs = sorted(s for _, sq in results for s in sq)
    assert statuses == [201] * 400
    # 400 agent messages in a burst with no human are what the loop guard flags (its default 50,
    # not refusing): its one loop.suspected message takes a seq among them.
    flags = list(
        Message.objects.filter(channel__name="race", status="loop.suspected").values_list(
            "seq", flat=True
        )
    )
    assert len(flags) == 1
    assert sorted(seqs + flags) == list(range(1, 402))
    stored = list(
        Message.objects.filter(channel__name="race").order_by("seq").values_list("seq", flat=True)
    )
    assert stored == list(range(1, 402))
    assert Channel.objects.get(name="race").last_seq == 401
    assert "database is locked" not in live.output()


def test_concurrent_idempotent_retries_store_one_message(live, make_agent):
    _, token = make_agent("retrier")
    create_channel(live, token, "idem")
    barrier = threading.Barrier(8)

    def send(_):
        with httpx.Client(base_url=live.url, headers=auth(token), timeout=60) as http:
            barrier.wait()
            r = http.post(
                "/api/v1/channels/idem/messages/", json={"title": "once", "id": "retry-1"}
            )
            return r.status_code, r.json()["seq"]

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(send, range(8)))
    assert sorted(status for status, _ in results) == [200] * 7 + [201]
    assert {seq for _, seq in results} == {1}
    assert Message.objects.filter(channel__name="idem").count() == 1


def test_sixteen_concurrent_marker_claimants_have_one_winner(live, make_agent):
    tokens = [make_agent(f"claimer{i}")[1] for i in range(16)]
    create_channel(live, tokens[0], "claims")
    barrier = threading.Barrier(16)

    def claim(token):
        with httpx.Client(base_url=live.url, headers=auth(token), timeout=60) as http:
            barrier.wait()
            r = http.post("/api/v1/channels/claims/claims/task-1.md/")
            return r.status_code, r.json()

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(claim, tokens))
    winners = [body for status, body in results if status == 201]
    losers = [body for status, body in results if status != 201]
    assert len(winners) == 1
    assert len(losers) == 15
    assert {body["error"]["code"] for body in losers} == {"MARKER_ALREADY_CLAIMED"}
    assert {body["error"]["detail"]["owner"] for body in losers} == {winners[0]["owner"]}


# --- wait -------------------------------------------------------------------------------------


async def _wait(live, token, channel, timeout):
    async with httpx.AsyncClient(
        base_url=live.url, headers=auth(token), timeout=timeout + 10
    ) as http:
        r = await http.get(f"/api/v1/channels/{channel}/wait/", params={"timeout": timeout})
        return r.status_code, r.json()


async def _post(live, token, channel, **body):
    async with httpx.AsyncClient(base_url=live.url, headers=auth(token), timeout=30) as http:
        r = await http.post(f"/api/v1/channels/{channel}/messages/", json=body)
        assert r.status_code == 201, r.text
        return r.json()


@pytest.fixture
def trio(live, make_agent):
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob", "carol")}
    create_channel(live, tokens["alice"], "waits")
    return tokens


def test_wait_returns_at_once_when_something_is_already_unread(live, trio):
    httpx.post(
        f"{live.url}/api/v1/channels/waits/messages/",
        json={"title": "early"},
        headers=auth(trio["alice"]),
    )
    status, body = asyncio.run(_wait(live, trio["bob"], "waits", 5))
    assert status == 200
    assert [m["title"] for m in body["messages"]] == ["early"]


@pytest.mark.parametrize(
    ("query", "status", "code"),
    [
        ("timeout=-1", 400, "INVALID_TIMEOUT"),
        ("timeout=abc", 400, "INVALID_TIMEOUT"),
        ("timeout=nan", 400, "INVALID_TIMEOUT"),
        ("timeout=inf", 400, "INVALID_TIMEOUT"),
        ("timeout=100000", 400, "INVALID_TIMEOUT"),
        ("timeout=1&x=2", 400, "UNKNOWN_FIELD"),
    ],
)
def test_wait_bad_parameters(live, trio, query, status, code):
    r = httpx.get(f"{live.url}/api/v1/channels/waits/wait/?{query}", headers=auth(trio["bob"]))
    assert (r.status_code, r.json()["error"]["code"]) == (status, code)


def test_wait_auth_and_channel_errors(live, trio):
    r = httpx.get(f"{live.url}/api/v1/channels/waits/wait/?timeout=0")
    assert (r.status_code, r.json()["error"]["code"]) == (401, "AUTH_REQUIRED")
    r = httpx.get(f"{live.url}/api/v1/channels/waits/wait/?timeout=0", headers=auth("nope"))
    assert (r.status_code, r.json()["error"]["code"]) == (401, "AUTH_INVALID")
    r = httpx.get(f"{live.url}/api/v1/channels/missing/wait/?timeout=0", headers=auth(trio["bob"]))
    assert (r.status_code, r.json()["error"]["code"]) == (404, "CHANNEL_NOT_FOUND")
    r = httpx.post(f"{live.url}/api/v1/channels/waits/wait/", headers=auth(trio["bob"]))
    assert (r.status_code, r.json()["error"]["code"]) == (405, "METHOD_NOT_ALLOWED")


# --- websockets -------------------------------------------------------------------------------


async def _frames(ws, count, timeout=10):
    frames = []
    for _ in range(count):
        frames.append(json.loads(await asyncio.wait_for(ws.recv(), timeout)))
    return frames


def test_websocket_streams_new_messages_and_resumes_with_since(live, trio):
    url = f"{live.ws_url}/ws/channels/waits/"

    async def scenario():
        async with websockets.connect(url, additional_headers=auth(trio["bob"])) as ws:
            await _post(live, trio["alice"], "waits", title="one", to="carol")
            await _post(live, trio["bob"], "waits", title="two")
            frames = await _frames(ws, 2)
        # disconnected: these are missed
        for i in range(3, 8):
            await _post(live, trio["alice"], "waits", title=f"m{i}")
        last = frames[-1]["message"]["seq"]
        async with websockets.connect(f"{url}?since={last}&token={trio['bob']}") as ws:
            replayed = await _frames(ws, 5)
            await _post(live, trio["carol"], "waits", title="live")
            live_frame = await _frames(ws, 1)
            # Nothing is sent twice: the frame after the live one is the next post's.
            await _post(live, trio["carol"], "waits", title="next")
            live_frame += await _frames(ws, 1)
        return frames, replayed, live_frame

    frames, replayed, live_frame = asyncio.run(scenario())
    assert [f["type"] for f in frames] == ["message", "message"]
    # unfiltered: another agent's mail and the subscriber's own post are streamed too
    assert [f["message"]["title"] for f in frames] == ["one", "two"]
    assert [f["message"]["seq"] for f in replayed] == [3, 4, 5, 6, 7]
    assert [f["message"]["seq"] for f in live_frame] == [8, 9]
    assert set(frames[0]["message"]) >= {
        "seq",
        "id",
        "channel",
        "from",
        "to",
        "reply_to",
        "status",
        "title",
        "body",
        "ts",
    }


def test_websocket_big_message_is_read_back_by_seq(live, trio):
    async def scenario():
        async with websockets.connect(
            f"{live.ws_url}/ws/channels/waits/?token={trio['bob']}"
        ) as ws:
            await _post(live, trio["alice"], "waits", title="big", body="x" * 100_000)
            await _post(live, trio["alice"], "waits", title="small")
            return await _frames(ws, 2)

    frames = asyncio.run(scenario())
    assert [f["message"]["seq"] for f in frames] == [1, 2]
    assert len(frames[0]["message"]["body"]) == 100_000


@pytest.mark.parametrize(
    ("headers", "query"),
    [
        ({}, ""),  # no token, no session
        ({"Authorization": "Bearer nope"}, ""),
        ({}, "?token=nope"),
        ({"Origin": "http://evil.example"}, "TOKEN"),
    ],
)
def test_websocket_handshake_is_refused(live, trio, headers, query):
    query = f"?token={trio['bob']}" if query == "TOKEN" else query

    async def scenario():
        with pytest.raises(websockets.exceptions.InvalidStatus) as info:
            async with websockets.connect(
                f"{live.ws_url}/ws/channels/waits/{query}", additional_headers=headers
            ):
                pass
        return info.value.response.status_code

    assert asyncio.run(scenario()) == 403


def test_websocket_allowed_origin_with_token_and_missing_channel(live, trio):
    async def scenario():
        async with websockets.connect(
            f"{live.ws_url}/ws/channels/waits/?token={trio['bob']}",
            additional_headers={"Origin": "http://localhost:8000"},
        ) as ws:
            await _post(live, trio["alice"], "waits", title="hello")
            frame = await _frames(ws, 1)
        with pytest.raises(websockets.exceptions.InvalidStatus):
            async with websockets.connect(
                f"{live.ws_url}/ws/channels/missing/?token={trio['bob']}"
            ):
                pass
        return frame

    assert asyncio.run(scenario())[0]["message"]["title"] == "hello"


# --- fan-out ----------------------------------------------------------------------------------


def _db_connections(live) -> int:
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            return cursor.fetchone()[0]
    import os

    fd_dir = f"/proc/{live.proc.pid}/fd"
    targets = []
    for fd in os.listdir(fd_dir):
        try:
            targets.append(os.readlink(f"{fd_dir}/{fd}"))
        except OSError:
            continue
    return sum(1 for t in targets if t.endswith(".sqlite3"))


def test_300_parked_waiters_all_get_one_post_with_bounded_threads_and_connections(live, make_agent):
    _, alice = make_agent("alice")
    # Each reader waits with one token and subscribes with another.
    readers = [make_agent(f"reader{i}")[1] for i in range(150)]
    subscribers = [make_agent(f"reader{i}")[1] for i in range(150)]
    create_channel(live, alice, "fanout")
    threads_before = live.threads()
    wait_tokens = ApiToken.objects.filter(agent__name__startswith="reader").order_by("pk")
    wait_tokens = list(wait_tokens.values_list("pk", flat=True))[:150]

    def every_wait_authenticated() -> bool:
        # A fresh token's first use is recorded: each wait has passed authentication.
        used = ApiToken.objects.filter(pk__in=wait_tokens, last_used_at__isnull=False)
        return used.count() == 150

    async def scenario():
        limits = httpx.Limits(max_connections=400, max_keepalive_connections=0)
        async with httpx.AsyncClient(base_url=live.url, timeout=60, limits=limits) as http:
            polls = [
                asyncio.create_task(
                    http.get(
                        "/api/v1/channels/fanout/wait/", params={"timeout": 30}, headers=auth(t)
                    )
                )
                for t in readers
            ]
            sockets = [
                await websockets.connect(f"{live.ws_url}/ws/channels/fanout/?token={t}")
                for t in subscribers
            ]
            await in_thread(lambda: wait_until(every_wait_authenticated, timeout=30))
            parked_threads = live.threads()
            parked_connections = await in_thread(lambda: _db_connections(live))
            assert not any(p.done() for p in polls)
            await _post(live, alice, "fanout", title="to all")
            responses = await asyncio.wait_for(asyncio.gather(*polls), 30)
            frames = await asyncio.gather(*(_frames(ws, 1, timeout=20) for ws in sockets))
            for ws in sockets:
                await ws.close()
            return responses, frames, parked_threads, parked_connections

    responses, frames, parked_threads, parked_connections = asyncio.run(scenario())
    assert [r.status_code for r in responses] == [200] * 150
    assert all([m["title"] for m in r.json()["messages"]] == ["to all"] for r in responses)
    assert all(f[0]["message"]["title"] == "to all" for f in frames)
    # Parked waiters hold no thread: the server has a few worker threads, not one per waiter.
    assert parked_threads <= max(threads_before, 10) + 12, (threads_before, parked_threads)
    # ... and no database connection (a small pool at most).
    assert parked_connections <= 12, parked_connections


def test_websocket_accepts_a_signed_in_staff_browser_with_its_origin(live, trio, django_user_model):
    from django.conf import settings
    from django.test import Client

    user = django_user_model.objects.create_user("ops", password="pw-123456", is_staff=True)
    browser = Client()
    browser.force_login(user)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"
    url = f"{live.ws_url}/ws/channels/waits/"

    async def scenario():
        headers = {"Cookie": cookie, "Origin": f"http://127.0.0.1:{live.port}"}
        async with websockets.connect(url, additional_headers=headers) as ws:
            await _post(live, trio["alice"], "waits", title="seen by ops")
            frame = await _frames(ws, 1)
        # the same session without an Origin is not a browser: refused
        with pytest.raises(websockets.exceptions.InvalidStatus):
            async with websockets.connect(url, additional_headers={"Cookie": cookie}):
                pass
        return frame

    assert asyncio.run(scenario())[0]["message"]["title"] == "seen by ops"
