"""The dashboard's pages within the budgets (agentchat.dashboard.budget): bounded bytes (long
bodies as excerpts linking to the whole message, which pages its body; the state page's texts
shortened, the page saying where it stops), the work budget (a page past it says so, 503), and
off the threads the API's short requests need (counted: which pool ran a page, what a held page
let through)."""

from __future__ import annotations

import asyncio
import re
import threading
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection

from agentchat.core.db import transactions as db
from agentchat.core.db.heavy import heavy_gate
from agentchat.dashboard import budget, reading, views
from agentchat.dashboard.reading import body_parts
from agentchat.state.markdown import state_markdown
from agentchat.state.selectors import state_summary
from channels_app import services
from channels_app.models import Channel
from tests.conftest import PagesClient
from tests.core.db.test_heavy import SLOW_SQLITE

DECISION_CHARS = 500_000


@pytest.fixture
def ann(django_user_model):
    return django_user_model.objects.create_user("ann", password="pw")


@pytest.fixture
def browser(ann) -> PagesClient:
    client = PagesClient()
    client.force_login(ann)
    return client


def fat_channel(name: str = "big", count: int = 80, chars: int = DECISION_CHARS) -> Channel:
    """``count`` decisions of ``chars`` characters each, in lines (the issue's 41 MB case)."""
    from agentchat.core.identity.services import agent_get_or_create

    agent_get_or_create(name="alice")
    channel = services.channel_create(name=name, created_by="alice")
    line = "a line of the decision's reasons, written out at length. " * 2 + "\n"
    body = (line * (chars // len(line) + 1))[:chars]
    for n in range(count):
        services.message_post(
            channel=channel, sender="alice", title=f"Decision: option {n}", body=body
        )
    return channel


@pytest.mark.django_db
def test_the_41_mb_channel_makes_bounded_pages_and_a_bounded_api_answer(browser, api_for, settings):
    channel = fat_channel()
    whole = state_markdown(state_summary(channel=channel))
    assert len(whole.encode()) > 40_000_000  # the folder's state.md, the reference's: whole
    page_max = settings.AGENTCHAT_PAGE_MAX_BYTES

    state = browser.get("/c/big/state/")
    assert state.status_code == 200
    assert len(state.content) < page_max  # 41 MB before
    html = state.content.decode()
    assert 'id="state-excerpts"' in html and 'id="state-over"' not in html
    for n in range(1, 81):  # every decision, shortened, links to its message
        assert f'href="/c/big/m/{n}/"' in html

    page = browser.get("/c/big/")
    assert page.status_code == 200 and len(page.content) < page_max  # 25 MB before
    assert page.content.count(b'class="whole"') == 50  # the 50 latest, each an excerpt

    message = browser.get("/c/big/m/7/")  # the whole message: one part, within the budget
    assert message.status_code == 200 and b'id="parts"' not in message.content
    assert len(message.content) < 2 * page_max and b'class="whole"' not in message.content
    phrase = b"written out at length"
    body = channel.messages.get(seq=7).body.encode()
    assert message.content.count(phrase) == body.count(phrase)

    alice = api_for("alice")
    for params in ({}, {"format": "md"}):
        r = alice.get("/api/v1/channels/big/state/", params)
        assert r.status_code == 200 and r["AgentChat-Truncated"] == "1"
        assert len(r.content) <= settings.AGENTCHAT_STATE_MAX_BYTES  # 41 MB before
    body = alice.get("/api/v1/channels/big/state/").json()
    assert body["truncated"] is True and len(body["decisions"]) == 80
    assert body["decisions"][0]["details"].endswith(
        "characters in all; the whole text is message #0001]"
    )


@pytest.mark.django_db
def test_an_excerpt_links_to_the_whole_message_which_pages_its_body(browser, settings):
    settings.AGENTCHAT_PAGE_MAX_BYTES = 10_000
    channel = services.channel_create(name="room", created_by="ann")
    body = "".join(f"paragraph {n}: {'é' * 50}\n\n" for n in range(400))  # about 44 KB
    services.message_post(channel=channel, sender="ann", title="long", body=body)
    services.message_post(channel=channel, sender="ann", title="short", body="just this")

    page = browser.get("/c/room/").content.decode()
    assert page.count('class="whole"') == 1
    assert 'href="/c/room/m/1/"' in page and "just this" in page

    parts = body_parts(body, 10_000)
    assert "".join(parts) == body and len(parts) >= 5
    assert all(len(part.encode()) <= 10_000 for part in parts)
    seen = []
    for n in range(1, len(parts) + 1):
        r = browser.get(f"/c/room/m/1/?part={n}")
        assert r.status_code == 200
        text = r.content.decode()
        assert f"part {n} of {len(parts)}" in text
        assert ('rel="next"' in text) == (n < len(parts))
        seen += re.findall(r"paragraph (\d+):", text)
    assert seen == [str(n) for n in range(400)]  # every paragraph once, in order
    for bad in ("0", str(len(parts) + 1), "x", "-1"):
        assert browser.get(f"/c/room/m/1/?part={bad}").status_code == 400
    assert browser.get("/c/room/m/99/").status_code == 404
    assert browser.get("/c/room/m/2/").content.count(b'class="whole"') == 0


@pytest.mark.django_db
def test_a_list_stops_showing_bodies_once_the_page_budget_is_used(browser, settings):
    settings.AGENTCHAT_PAGE_MAX_BYTES = 6000
    channel = services.channel_create(name="room", created_by="ann")
    for n in range(6):
        services.message_post(
            channel=channel,
            sender="ann",
            title=f"ask {n}",
            body=f"word{n} " + "budget words " * 240,
            status="needs-approval",
        )
    for path in ("/c/room/", "/search/?q=budget", "/approvals/"):
        r = browser.get(path)
        assert r.status_code == 200, path
        text = r.content.decode()
        assert 'id="budget-used"' in text, path
        assert "Body not shown" in text and 'class="whole"' in text, path


@pytest.mark.django_db
def test_the_state_page_says_where_it_stops(browser, settings):
    settings.AGENTCHAT_PAGE_MAX_BYTES = 3000
    channel = services.channel_create(name="room", created_by="ann")
    for n in range(60):
        services.message_post(channel=channel, sender="ann", title=f"Decision: d{n}", body="ok")
    r = browser.get("/c/room/state/")
    assert r.status_code == 200
    text = r.content.decode()
    assert 'id="state-over"' in text and "The summary stops here" in text
    assert "d0" in text and "d59" not in text


@pytest.mark.django_db(transaction=True)  # PostgreSQL: the abort ends the test's transaction
@pytest.mark.parametrize(
    "path", ["/c/room/state/", "/c/room/", "/c/room/m/1/", "/search/?q=hello", "/approvals/"]
)
def test_a_page_past_the_work_budget_says_so(browser, settings, path):
    channel = services.channel_create(name="room", created_by="ann")
    services.message_post(channel=channel, sender="ann", title="hello", body="hello there",
                          status="needs-approval")  # fmt: skip
    settings.AGENTCHAT_HEAVY_BUDGET_SECONDS = 0
    r = browser.get(path)
    assert r.status_code == 503
    text = r.content.decode()
    assert 'id="budget-exceeded"' in text and "ran out of its budget" in text
    assert '<nav class="top-nav"' in text  # a page of the dashboard, signed in: not blank, no 500
    settings.AGENTCHAT_HEAVY_BUDGET_SECONDS = 30
    assert browser.get(path).status_code == 200


@pytest.mark.django_db(transaction=True)
def test_a_statement_past_the_budget_is_stopped_by_the_database(browser, settings, monkeypatch):
    services.channel_create(name="room", created_by="ann")
    real = views.task_page

    def slow(**kwargs: Any) -> Any:
        with connection.cursor() as cursor:
            if connection.vendor == "postgresql":
                cursor.execute("SELECT pg_sleep(5)")
            else:
                cursor.execute(SLOW_SQLITE)
        return real(**kwargs)

    monkeypatch.setattr(views, "task_page", slow)
    settings.AGENTCHAT_HEAVY_BUDGET_SECONDS = 0.05
    r = browser.get("/c/room/tasks/")
    assert r.status_code == 503 and b'id="budget-exceeded"' in r.content


# --- off the short requests' threads: the real pools, the real ASGI application -------------


async def asgi(app: Any, method: str, path: str, headers: list[tuple[bytes, bytes]],
               body: bytes = b"") -> tuple[int, bytes]:  # fmt: skip
    """One request through ``app``, in process: (status, body)."""
    path, _, query = path.partition("?")
    scope = {
        "type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1", "method": method, "scheme": "http", "path": path,
        "raw_path": path.encode(), "root_path": "", "query_string": query.encode(),
        "headers": [(b"host", b"testserver"), *headers,
                    (b"content-length", str(len(body)).encode())],
        "client": ("127.0.0.1", 1), "server": ("testserver", 80),
    }  # fmt: skip
    sent: list[dict[str, Any]] = []
    answered = asyncio.Event()
    given = False

    async def receive() -> dict[str, Any]:
        nonlocal given
        if not given:
            given = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message["type"] == "http.response.body" and not message.get("more_body"):
            answered.set()

    await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def session_cookie(user: Any) -> list[tuple[bytes, bytes]]:
    client = PagesClient()
    client.force_login(user)
    return [(b"cookie", f"sessionid={client.cookies['sessionid'].value}".encode())]


@pytest.mark.django_db(transaction=True)  # the pools' threads have connections of their own
@pytest.mark.parametrize("concurrency", [1, 2])
def test_a_page_holds_no_short_request_thread_and_one_heavy_thread_per_person(
    make_agent, settings, monkeypatch, concurrency
):
    from agentchat.asgi import application

    settings.AGENTCHAT_HEAVY_QUEUE_PER_AGENT = 2
    settings.AGENTCHAT_PAGE_CONCURRENCY = concurrency  # pages of all people at once
    users = get_user_model().objects
    ann, ben = users.create_user("ann", password="pw"), users.create_user("ben", password="pw")
    _, token = make_agent("alice")
    services.channel_create(name="room", created_by="alice")
    entered = threading.Semaphore(0)
    release = threading.Event()
    threads: list[str] = []
    real = reading.state_summary

    def held(**kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        entered.release()
        assert release.wait(60), "never released"
        return real(**kwargs)

    monkeypatch.setattr(reading, "state_summary", held)
    ann_cookie, ben_cookie = session_cookie(ann), session_cookie(ben)
    api = [(b"authorization", f"Bearer {token}".encode()), (b"content-type", b"application/json")]
    ann_key = budget.page_key(ann.pk)
    # Pages are long requests: the gate keeps one heavy thread from them (for peeks).
    running_max = min(concurrency, max(1, db._heavy_executor()._max_workers - 1))

    async def main() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        page = "/c/room/state/"
        anns = [asyncio.ensure_future(asgi(application, "GET", page, ann_cookie)) for _ in "123"]
        bens = asyncio.ensure_future(asgi(application, "GET", page, ben_cookie))
        # Ann's first page and, with room for two, ben's are running: a heavy thread each, but
        # never the one the gate keeps for peeks.
        for _ in range(running_max):
            assert await loop.run_in_executor(None, entered.acquire, True, 60)
        while heavy_gate().waiting(ann_key) < 3:
            await asyncio.sleep(0.01)
        # A fourth page of ann's is past the queue: refused at once, holding nothing.
        busy = await asyncio.wait_for(asgi(application, "GET", page, ann_cookie), 60)
        # The API's short requests are served while every heavy thread holds a page.
        posted = await asyncio.wait_for(
            asgi(application, "POST", "/api/v1/channels/room/messages/", api, b'{"title": "hi"}'),
            60,
        )
        running = list(threads)
        release.set()
        done = await asyncio.wait_for(asyncio.gather(*anns, bens), 120)
        assert heavy_gate().waiting(ann_key) == 0
        return {"busy": busy, "posted": posted, "running": running, "done": done}

    out = asyncio.run(main())
    assert out["posted"][0] == 201
    assert out["busy"][0] == 429 and b'id="budget-busy"' in out["busy"][1]
    # While held: as many pages ran as there are slots, each on a heavy thread (never a short
    # request's); ann's others waited in her queue, ben's (with one slot) for the slot.
    assert len(out["running"]) == running_max
    assert all(name.startswith("agentchat-db-heavy") for name in out["running"])
    assert [status for status, _ in out["done"]] == [200] * 4
    assert len(threads) == 4 and all(name.startswith("agentchat-db-heavy") for name in threads)
