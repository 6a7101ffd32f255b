"""The overview in Chromium and Firefox: the home after sign-in, live without reloading (its
poll, called as its timer calls it: no test waits on a clock), the sidebar by activity, the
tab title's count, desktop notifications only after the person's click (the browser's
Notification replaced by a recorder: no browser prompts in a headless run), the keyboard
shortcuts (not while typing in a field), and the compact phone header with its sidebar."""

from __future__ import annotations

import httpx

from tests.browser.test_dashboard import browser, team  # noqa: F401  (fixtures)
from tests.conftest import auth

# The browser's Notification, recorded: what was shown, and whether permission was asked.
RECORDER = """
(() => {
  const shown = [], asked = [];
  class Recorded {
    constructor(title, options) { shown.push((options && options.body) || title); }
    static requestPermission() {
      asked.push(1);
      Recorded.permission = "granted";
      return Promise.resolve("granted");
    }
  }
  Recorded.permission = "default";
  window.Notification = Recorded;
  window.__notes = { shown, asked };
})();
"""


def _post(live, token: str, **body: object) -> None:
    r = httpx.post(f"{live.url}/api/v1/channels/room/messages/", json=body, headers=auth(token))
    assert r.status_code == 201, r.text


def test_the_overview_is_live_notifies_after_opt_in_and_answers_the_keyboard(browser, team):  # noqa: F811
    live, token = team
    httpx.post(
        f"{live.url}/api/v1/channels/",
        json={"name": "quiet", "topic": "nothing new"},
        headers=auth(token),
    ).raise_for_status()
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    context.add_init_script(RECORDER)
    page = context.new_page()
    page.goto(f"{live.url}/signin/")
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", "a-long-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live.url}/")  # the overview is home
    page.wait_for_selector("body[data-nav-loaded]", state="attached")
    assert page.locator("#ov-agent-alice").count() == 1
    assert "Payments schema" in page.locator("#ov-agent-alice").inner_text()  # its lease
    assert "api/payments.py" in page.locator("#ov-agent-alice").inner_text()  # its lock
    assert page.evaluate("window.__notes.asked.length") == 0  # never asked on load
    names = page.locator("#sidebar-list .sidebar-name").all_inner_texts()
    assert names[0] == "room" and "quiet" in names  # room has the latest activity

    page.click("#notify-toggle")
    page.wait_for_function("() => window.__notes.asked.length === 1")
    assert page.locator("#notify-toggle").inner_text() == "Notifications on"

    _post(live, token, title="May I deploy?", status="needs-approval")
    _post(live, token, title="For ann", to=["ann"])
    page.evaluate("window.AgentChatOverview.refresh()")  # what its timer does
    page.wait_for_selector("#ov-approvals >> text=May I deploy?")
    page.evaluate("window.AgentChatShell.poll()")
    page.wait_for_function("() => window.__notes.shown.length >= 2")
    shown = page.evaluate("window.__notes.shown")
    assert any("asks for approval in room: May I deploy?" in text for text in shown)
    assert any("new message" in text and "in room" in text for text in shown)
    page.wait_for_function("() => /^\\(\\d+\\) Overview/.test(document.title)")

    # Keyboard: not while typing; ? shows the help; n goes to the next unread channel.
    page.focus(".bar form.search input")
    page.keyboard.press("n")
    assert page.url == f"{live.url}/"
    page.keyboard.press("Escape")
    page.locator("main h1").click()
    page.keyboard.press("?")
    assert page.locator("#shortcuts").is_visible()
    page.keyboard.press("Escape")
    assert not page.locator("#shortcuts").is_visible()
    page.keyboard.press("n")
    page.wait_for_url(f"{live.url}/c/room/")
    page.wait_for_selector("body[data-nav-loaded]", state="attached")
    page.keyboard.press("Alt+ArrowDown")
    page.wait_for_url(f"{live.url}/c/quiet/")
    page.wait_for_selector("body[data-nav-loaded]", state="attached")
    page.keyboard.press("g")
    page.keyboard.press("o")
    page.wait_for_url(f"{live.url}/")

    # A phone: the header is compact, the sidebar a button away.
    page.set_viewport_size({"width": 390, "height": 800})
    header = page.locator("header.bar").bounding_box()
    assert header is not None and header["height"] <= 100
    assert not page.locator("#sidebar").is_visible()
    page.click("#sidebar-toggle")
    assert page.locator("#sidebar").is_visible()
    assert page.locator("#sidebar-toggle").get_attribute("aria-expanded") == "true"
    context.close()
