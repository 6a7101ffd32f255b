"""The state page's whiteboard (EP-0118) and a signal in the thread, in real browsers against
a real server: an agent writes the whiteboard and signals over the API, a person signed in
sees both. Screenshots as the dashboard's tests take them (``<browser>-state-whiteboard-…``)."""

from __future__ import annotations

import httpx

from tests.browser.test_dashboard import _shots, _signed_in, browser, team  # noqa: F401
from tests.conftest import auth


def test_the_whiteboard_and_a_signal_show_on_the_dashboard(browser, team):  # noqa: F811
    live, token = team
    api = f"{live.url}/api/v1/channels/room"
    for key, value in (
        ("goal", {"ship": "payments v0.2", "by": "friday", "owners": ["alice", "bob"]}),
        ("phase", "review"),
        ("notes", "<script>window.__xss = 1</script> not markup"),
    ):
        r = httpx.put(f"{api}/whiteboard/{key}/", json={"value": value}, headers=auth(token))
        assert r.status_code == 201, r.text
    r = httpx.post(
        f"{api}/signals/",
        json={"to": "*", "type": "warn", "content": "Schema frozen until Friday\nno migrations"},
        headers=auth(token),
    )
    assert r.status_code == 201, r.text
    page = _signed_in(browser, live)
    item = page.locator("li.message").filter(has_text="Schema frozen until Friday")
    item.wait_for()
    assert "warn" in item.inner_text()
    page.goto(f"{live.url}/c/room/state/")
    table = page.locator("section.whiteboard table")
    table.wait_for()
    rows = table.locator("tbody tr")
    assert rows.count() == 3
    goal = page.locator("#whiteboard-goal")
    assert "payments v0.2" in goal.inner_text() and "alice" in goal.inner_text()
    assert "<script>" in page.locator("#whiteboard-notes pre").inner_text()
    assert page.evaluate("window.__xss") is None
    _shots(page, "state-whiteboard")
