"""The dashboard in real headless browsers against a real server process, each test once in
Chromium (Debian's ``chromium``, driven by Playwright with ``executable_path``) and once in
Firefox (Debian's ``firefox-esr``, driven by Playwright over WebDriver BiDi: the ``moz-firefox``
channel with ``executable_path``); ``.ci/run`` installs both packages when missing, and no
browser is ever downloaded. Sign in, open a channel, see an agent's message arrive live, post a
threaded reply, mark read, approve, and nothing a hostile body says runs, on page load or on
live arrival. Screenshots of each page, at desktop and phone width, land in the data folder's
``screenshots/`` as ``<browser>-<page>-<width>.png``."""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from agentchat.core.identity.services import agent_get_or_create, token_create
from agentchat.core.rules.records import Duration
from channels_app import services
from channels_app.models import Channel
from locks_app import services as locks
from locks_app.selectors import lock_paths_parse
from tasks_app import services as tasks
from tests.conftest import auth, require_service
from tests.tasks_app.helpers import lasting

# Each browser: the Debian package that installs it, its executable, and Playwright's launch.
BROWSERS = {
    "chromium": ("chromium", Path("/usr/bin/chromium"), {}),
    # Stock Firefox speaks WebDriver BiDi; Playwright reaches it through the moz-firefox channel.
    "firefox": ("firefox-esr", Path("/usr/bin/firefox-esr"), {"channel": "moz-firefox"}),
}
ARRIVAL_MS = 2000  # the bound for live arrival in tests (the aim is 1 s)
HOSTILE = (
    "<script>window.__xss = 'script'</script>\n\n"
    "<img src=x onerror=\"window.__xss = 'img'\">\n\n"
    "[click](javascript:window.__xss='link')\n\n"
    '<a href="#" onclick="window.__xss=\'onclick\'">raw</a>\n\n'
    "<iframe src=\"javascript:parent.__xss='iframe'\"></iframe>\n\n"
    "**still bold**"
)


@pytest.fixture(params=sorted(BROWSERS))
def browser(request: pytest.FixtureRequest) -> Iterator[object]:
    package, executable, options = BROWSERS[request.param]
    require_service(
        request.param,
        executable.exists(),
        f"{executable} missing (apt-get install --no-install-recommends {package})",
    )
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop in this thread; the test's own ORM calls (made
    # between browser steps, never inside one) are still plain synchronous calls.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    try:
        with sync_playwright() as playwright:
            launcher = getattr(playwright, request.param)
            browser = launcher.launch(executable_path=str(executable), **options)
            yield browser
            browser.close()
    finally:
        os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)


@pytest.fixture
def team(live, django_user_model):
    django_user_model.objects.create_user("ann", password="a-long-password")
    alice = agent_get_or_create(name="alice")
    token = token_create(agent=alice)
    room = services.channel_create(name="room", created_by="alice", topic="payments rollout")
    tasks.task_create(channel=room, task_id="T-1", title="Payments schema", created_by="alice")
    tasks.task_create(
        channel=room, task_id="T-2", title="POST /payments", created_by="alice", depends_on=["T-1"]
    )
    tasks.lease_claim(channel=room, task_id="T-1", actor="alice", duration=lasting(900))
    locks.lock_acquire(
        channel=room,
        owner="alice",
        paths=lock_paths_parse(["api/payments.py"]),
        lease_seconds=Duration.parse(600),
    )
    return live, token


def _shots(page, name: str) -> None:
    folder = Path(settings.DATA_DIR) / "screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    engine = page.context.browser.browser_type.name
    for label, size in (("desktop", (1280, 860)), ("phone", (390, 800))):
        page.set_viewport_size({"width": size[0], "height": size[1]})
        page.screenshot(path=str(folder / f"{engine}-{name}-{label}.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 860})


def _post(live, token: str, **body: object) -> dict:
    r = httpx.post(f"{live.url}/api/v1/channels/room/messages/", json=body, headers=auth(token))
    assert r.status_code == 201, r.text
    return r.json()


def _signed_in(browser, live):
    page = browser.new_page(viewport={"width": 1280, "height": 860})
    page.goto(f"{live.url}/c/room/")
    assert page.url.startswith(f"{live.url}/signin/")
    _shots(page, "signin")
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", "a-long-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live.url}/c/room/")
    return page


def test_a_message_arrives_live_a_reply_threads_and_mark_read_drops_the_count(browser, team):
    live, token = team
    first = _post(live, token, title="Kickoff", body="Plan:\n\n1. schema\n2. **endpoints**")
    page = _signed_in(browser, live)
    page.wait_for_selector(f"#m-{first['seq']}")
    page.wait_for_function("() => window.__socketOpen === true", timeout=5000)

    second = _post(live, token, title="Live one", body="arrives *without* reload")
    page.wait_for_selector(f"#m-{second['seq']} .body em", timeout=ARRIVAL_MS)
    assert page.locator("#mark-read-seq").get_attribute("value") == str(second["seq"])
    # Seen on arrival (in view, the tab visible): read, the count back to 0.
    page.wait_for_function("() => document.getElementById('unread-count').dataset.unread === '0'")
    _shots(page, "channel")

    page.locator(f"#m-{first['seq']} a.reply").click()  # fills reply-to
    page.click("#more-fields summary")
    page.fill("input[name=title]", "Re: Kickoff")
    page.fill("textarea[name=body]", "Sounds good")
    page.click("#composer button[type=submit]")
    reply = second["seq"] + 1
    page.wait_for_selector(f"#m-{reply}")
    parent = page.locator(f"#m-{reply} a.parent-link")
    assert parent.get_attribute("href") == f"#m-{first['seq']}"
    assert "Kickoff" in parent.inner_text()
    assert page.locator(f"#m-{reply} .kind").inner_text().strip().lower() == "human"

    page.goto(f"{live.url}/channels/")
    assert page.locator("#channel-room .badge").count() == 0  # what was seen was read
    _shots(page, "channels")
    page.click("#channel-room a")
    page.click("nav.tabs >> text=Tasks")
    assert "T-1 (in_progress)" in page.locator("#task-T-2").inner_text()
    countdown = page.locator("#task-T-1 time.countdown")
    shown = countdown.inner_text()
    page.wait_for_function(
        "t => document.querySelector('#task-T-1 time.countdown').textContent !== t", arg=shown
    )  # it counts down
    _shots(page, "tasks")
    page.click("nav.tabs >> text=Locks")
    assert "api/payments.py" in page.locator("table.table").inner_text()
    _shots(page, "locks")
    page.click("nav.tabs >> text=State")
    assert "Task T-2 blocked on dependencies: T-1" in page.locator("article.state").inner_text()
    _shots(page, "state")
    page.click("header nav >> text=Agents")
    assert page.locator("#agent-alice").count() == 1
    _shots(page, "agents")
    page.fill("header form.search input[name=q]", "kickoff")
    page.press("header form.search input[name=q]", "Enter")
    page.wait_for_selector(f"#r-room-{first['seq']}")
    _shots(page, "search")


def _assert_nothing_ran(page) -> None:
    assert page.evaluate("() => window.__xss") is None
    found = page.evaluate(
        """() => {
          const bad = [];
          for (const el of document.querySelectorAll('#messages *')) {
            if (['SCRIPT', 'IMG', 'IFRAME', 'SVG', 'STYLE', 'OBJECT', 'EMBED'].includes(el.tagName))
              bad.push(el.tagName);
            for (const attr of el.attributes) {
              const inBody = el.parentElement.closest('.body');
              if (attr.name.startsWith('on') || /^\\s*javascript:/i.test(attr.value)
                  || ['style', 'class', 'id'].includes(attr.name) && inBody)
                bad.push(el.tagName + '@' + attr.name);
            }
          }
          return bad;
        }"""
    )
    assert found == []


def test_a_hostile_body_runs_nothing_on_load_or_on_live_arrival(browser, team):
    live, token = team
    loaded = _post(live, token, title="on load", body=HOSTILE)
    page = _signed_in(browser, live)
    page.wait_for_selector(f"#m-{loaded['seq']}")
    _assert_nothing_ran(page)
    page.wait_for_function("() => window.__socketOpen === true", timeout=5000)
    arrived = _post(live, token, title="live", body=HOSTILE)
    page.wait_for_selector(f"#m-{arrived['seq']} .body strong", timeout=ARRIVAL_MS)
    _assert_nothing_ran(page)
    assert "still bold" in page.locator(f"#m-{arrived['seq']} .body").inner_text()


def test_an_agent_waits_for_approval_and_a_human_approves_in_the_browser(
    browser, team, django_user_model
):
    live, token = team
    django_user_model.objects.create_user("bea", password="another-password")
    asked = _post(live, token, title="Deploy to prod?", status="needs-approval", body="now?")
    # The agent reads up to its request, then waits for what comes next.
    httpx.post(f"{live.url}/api/v1/channels/room/ack/", json={}, headers=auth(token))
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(
            httpx.get,
            f"{live.url}/api/v1/channels/room/wait/",
            params={"timeout": "30"},
            headers=auth(token),
            timeout=40,
        )
        page = _signed_in(browser, live)
        page.click("#nav-approvals")
        card = page.locator(f"#approval-room-{asked['seq']}")
        assert "Deploy to prod?" in card.inner_text()
        _shots(page, "approvals")
        card.locator("input[name=comment]").fill("go ahead")
        card.locator("button[value=approved]").click()
        page.wait_for_url(f"{live.url}/approvals/")
        answer = waiting.result(timeout=40)
    assert answer.status_code == 200, answer.text
    [reply] = answer.json()["messages"]
    assert (reply["reply_to"], reply["status"], reply["sender_kind"]) == (
        asked["seq"],
        "approved",
        "human",
    )
    assert page.locator(f"#approval-room-{asked['seq']}").count() == 0
    listed = httpx.get(f"{live.url}/api/v1/approvals/", headers=auth(token)).json()
    assert listed["approvals"] == []


def test_with_a_maintainer_another_humans_approval_leaves_it_pending(browser, team):
    live, token = team
    Channel.objects.filter(name="room").update(maintainer="mia")
    asked = _post(live, token, title="Drop the table?", status="needs-approval")
    page = _signed_in(browser, live)
    page.goto(f"{live.url}/approvals/")
    card = page.locator(f"#approval-room-{asked['seq']}")
    assert "Only mia's answer decides: yours is a comment." in card.inner_text()
    card.locator("button[value=approved]").click()
    page.wait_for_url(f"{live.url}/approvals/")
    assert page.locator(f"#approval-room-{asked['seq']}").count() == 1  # still pending
    listed = httpx.get(f"{live.url}/api/v1/approvals/", headers=auth(token)).json()
    assert [a["request"]["seq"] for a in listed["approvals"]] == [asked["seq"]]


def test_the_agents_page_shows_the_registry_with_stale_flagged(browser, team):
    from datetime import timedelta

    from django.utils import timezone

    from agentchat.core.models import Registration

    live, token = team
    r = httpx.post(
        f"{live.url}/api/v1/agents/register/",
        json={"agent": "alice", "harness": "claude-code", "substrate": "claude-sonnet-4.6"},
        headers=auth(token),
    )
    assert r.status_code == 201, r.text
    for name, harness in (("bob", "codex"), ("carol", "junie")):
        other = token_create(agent=agent_get_or_create(name=name))
        r = httpx.post(
            f"{live.url}/api/v1/agents/register/",
            json={"agent": name, "harness": harness},
            headers=auth(other),
        )
        assert r.status_code == 201, r.text
    idle = httpx.post(f"{live.url}/api/v1/agents/idle/", json={}, headers=auth(other))
    assert idle.json()["others_active"] == 2
    Registration.objects.filter(agent__name="bob").update(
        last_heartbeat=timezone.now() - timedelta(seconds=settings.AGENTCHAT_STALE_SECONDS + 60)
    )
    page = _signed_in(browser, live)
    page.click("header nav >> text=Agents")
    assert page.locator("#agent-alice .presence .pill").inner_text() == "active"
    assert "claude-code · claude-sonnet-4.6" in page.locator("#agent-alice").inner_text()
    assert page.locator("#agent-bob .presence .pill").inner_text() == "stale"
    assert "stale" in page.locator("#agent-bob").get_attribute("class").split()
    assert page.locator("#agent-carol .presence .pill").inner_text() == "idle"
    assert page.locator("#agent-ann .presence").inner_text().strip() == "—"
    _shots(page, "agents-presence")


def test_sub_agents_show_under_their_parent_on_the_agents_and_channel_pages(browser, team):
    live, token = team
    for body in (
        {"agent": "alice", "harness": "claude-code", "substrate": "claude-sonnet-4.6"},
        {"agent": "alice.critic", "harness": "claude-code", "substrate": "claude-haiku-4.5"},
        {"agent": "alice.critic.popper", "harness": "claude-code"},
        {"harness": "claude-code", "substrate": "claude-sonnet-4.6", "conversation_id": "c-1"},
    ):
        r = httpx.post(f"{live.url}/api/v1/agents/register/", json=body, headers=auth(token))
        assert r.status_code == 201, r.text
    generated = r.json()["agent"]
    acting = {**auth(token), "AgentChat-As": "alice.critic"}
    r = httpx.post(
        f"{live.url}/api/v1/channels/room/messages/", json={"title": "critique"}, headers=acting
    )
    assert r.status_code == 201, r.text
    page = _signed_in(browser, live)
    page.click("header nav >> text=Agents")
    names = page.locator("table.agents tbody tr").evaluate_all("rows => rows.map(r => r.id)")
    at = names.index("agent-alice")
    assert names[at : at + 4] == [
        "agent-alice",
        f"agent-{generated}",  # alice.claude_… before alice.critic
        "agent-alice.critic",
        "agent-alice.critic.popper",
    ]
    assert page.locator("#agent-alice\\.critic").get_attribute("data-parent") == "alice"
    popper = page.locator("#agent-alice\\.critic\\.popper")
    assert popper.get_attribute("data-parent") == "alice.critic"
    assert popper.locator(".presence .pill").inner_text() == "active"
    # Indented under the parent: the name starts further right than the parent's.
    left = [
        page.locator(f"#{row.replace('.', chr(92) + '.')} td.who strong").bounding_box()["x"]
        for row in (names[at], names[at + 2], names[at + 3])
    ]
    assert left[0] < left[1] < left[2], left
    _shots(page, "agents-subagents")
    page.goto(f"{live.url}/c/room/")
    critic = page.locator("#member-alice\\.critic")
    assert critic.get_attribute("data-parent") == "alice"
    assert critic.locator(".pill").inner_text() == "active"
    _shots(page, "channel-members")
