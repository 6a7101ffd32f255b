"""The channel page as a chat (issue 21), in Chromium and Firefox at 1280 and 390 px: nothing
wider than the window, opening at the first unread, following new messages or a "N new" pill,
the composer (Enter sends, a derived title, reply from a message), read as seen and "mark
unread from here", local times and day separators, compact audits and the conversation-only
filter, markdown reply quotes, the thread view. No sleeps: each step waits for a condition."""

from __future__ import annotations

import pytest

from agentchat.core.identity.humans import human_agent
from channels_app import services
from channels_app.models import Channel, Cursor
from tests.browser.test_dashboard import _post, _shots, browser, team  # noqa: F401 (fixtures)

WIDTHS = {"desktop": (1280, 860), "phone": (390, 800)}
LONG = "x" * 400
JSON_LINE = '{"type":"task.updated","data":"' + "y" * 600 + '"}'


def _sign_in(browser, live, width, path="/c/room/"):  # noqa: F811
    page = browser.new_page(viewport={"width": WIDTHS[width][0], "height": WIDTHS[width][1]})
    page.goto(f"{live.url}/signin/?next={path}")
    page.fill("input[name=username]", "ann")
    page.fill("input[name=password]", "a-long-password")
    page.click("button[type=submit]")
    page.wait_for_url(f"{live.url}{path}")
    page.wait_for_function("() => window.__channelReady === true")
    return page


def _no_wider(page) -> None:
    width, scroll = page.evaluate("() => [window.innerWidth, document.documentElement.scrollWidth]")
    assert scroll <= width, (scroll, width)


def _me(django_user_model):
    return human_agent(django_user_model.objects.get(username="ann"))


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_long_strings_stay_inside_the_window_and_quotes_render_markdown(
    browser,  # noqa: F811
    team,  # noqa: F811
    width,
):
    live, token = team
    first = _post(live, token, title=LONG, body="**bold** quote\n\n" + LONG)
    _post(
        live,
        token,
        title="links",
        body=f"https://example.com/{LONG}\n\n```\n{LONG}\n```\n\n| a |\n|---|\n| {LONG} |",
        reply_to=first["seq"],
    )
    page = _sign_in(browser, live, width)
    _no_wider(page)
    quote = page.locator(".message .quote strong").first
    assert quote.inner_text() == "bold"  # markdown, not "**bold**"
    code = page.locator(".message .body pre").first
    assert code.evaluate("el => el.scrollWidth > el.clientWidth")  # scrolls inside itself
    page.locator(".message.compact summary").first.click()  # an expanded record, too
    _no_wider(page)
    _shots(page, f"chat-long-{width}")


def test_opens_at_the_first_unread_reads_as_seen_and_marks_unread(
    browser,  # noqa: F811
    team,  # noqa: F811
    django_user_model,
):
    live, token = team
    room = Channel.objects.get(name="room")
    seqs = [_post(live, token, title=f"m{n}", body=f"body {n}")["seq"] for n in range(60)]
    me = _me(django_user_model)
    services.cursor_ack(channel=room, agent=me, seq=seqs[1])
    page = _sign_in(browser, live, "desktop")
    assert page.locator("#first-unread + li.message").get_attribute("id") == f"m-{seqs[2]}"
    assert page.locator("#newer").count() == 1  # the page starts above the first unread
    marker_top = page.locator("#first-unread").evaluate("el => el.getBoundingClientRect().top")
    assert -2 <= marker_top < 860  # at the top of the window (sub-pixel in Firefox)
    # What is in view gets read; never beyond it.
    page.wait_for_function("() => document.title.startsWith('(')")
    page.wait_for_function(
        "() => parseInt(document.getElementById('unread-count').dataset.unread) < 58"
    )
    seq = Cursor.objects.get(agent=me, channel=room).seq
    shown = page.evaluate(
        """() => Math.max(...[...document.querySelectorAll('li.message')]
              .filter(li => li.getBoundingClientRect().top < innerHeight)
              .map(li => +li.dataset.seq))"""
    )
    assert seqs[2] < seq <= shown
    page.locator(f"#m-{seqs[3]} button.mark-unread").click()
    page.wait_for_selector("#read-note:not([hidden])")
    assert Cursor.objects.get(agent=me, channel=room).seq == seqs[2]
    assert page.locator("#first-unread + li.message").get_attribute("id") == f"m-{seqs[3]}"


@pytest.mark.parametrize("width", sorted(WIDTHS))
def test_follows_at_the_bottom_else_a_pill_and_the_composer_sends_with_enter(
    browser,  # noqa: F811
    team,  # noqa: F811
    django_user_model,
    width,
):
    live, token = team
    room = Channel.objects.get(name="room")
    for n in range(30):
        top = _post(live, token, title=f"m{n}", body=f"body {n}")["seq"]
    services.cursor_ack(channel=room, agent=_me(django_user_model), seq=top)
    page = _sign_in(browser, live, width)
    page.wait_for_function("() => window.__socketOpen === true")
    page.wait_for_function(
        "() => innerHeight + scrollY >= document.documentElement.scrollHeight - 80"
    )
    one = _post(live, token, title="live one", body="*hi*")["seq"]
    page.wait_for_selector(f"#m-{one} .body em")
    page.wait_for_function(
        "() => innerHeight + scrollY >= document.documentElement.scrollHeight - 80"
    )
    page.evaluate("() => window.scrollTo(0, 0)")
    _post(live, token, title="out of sight", body="there")
    page.wait_for_selector("#new-pill:not([hidden])")
    assert page.locator("#new-pill").inner_text().startswith("1 new")
    page.click("#new-pill")
    page.wait_for_selector("#new-pill", state="hidden")
    # The composer: a reply from a message, Enter sends, Shift+Enter a new line, no title.
    page.locator(f"#m-{one} a.reply").click()
    assert page.locator("#reply-to").input_value() == str(one)
    box = page.locator("#composer-body")
    box.type("ok")
    box.press("Shift+Enter")
    box.type("second line")
    box.press("Enter")
    page.wait_for_selector(f"#m-{one + 2}")
    posted = room.messages.get(seq=one + 2)
    assert (posted.title, posted.body, posted.reply_to) == ("ok", "ok\nsecond line", one)
    assert page.locator(f"#m-{one + 2} .title").count() == 0  # the derived title is not repeated
    # A person's Shift+Enter line shows as a line (markdown "breaks"), not as a space.
    assert page.locator(f"#m-{one + 2} .body br").count() == 1
    lines = page.locator(f"#m-{one + 2} .body p").inner_text().splitlines()
    assert [line.strip() for line in lines] == ["ok", "second line"], lines
    assert box.input_value() == ""
    _no_wider(page)
    _shots(page, f"chat-composer-{width}")


def test_audits_are_compact_filtered_and_counted_apart_times_and_the_thread(
    browser,  # noqa: F811
    team,  # noqa: F811
):
    live, token = team  # the team's task claim and lock left audits in the channel
    question = _post(live, token, title="Q", body="why?")
    answer = _post(live, token, title="A", body="because", reply_to=question["seq"])
    _post(live, token, title="A2", body="and so", reply_to=answer["seq"])
    # Signed in on a page that shows nothing (so nothing is read yet): the counts as served.
    page = _sign_in(browser, live, "desktop", "/c/room/?before=1")
    served = page.request.get(f"{live.url}/c/room/").text()
    assert 'data-conversation="3"' in served, served
    # The tab title and the sidebar's badge count conversation (3), not the audits too; the
    # sidebar's poll leaves the channel page's own title alone.
    page.wait_for_function("() => document.body.dataset.navLoaded === '1'")
    assert page.title() == "(3) room · AgentChat", page.title()
    assert page.locator("#sidebar-list .badge").first.inner_text().split()[0] == "3"
    page.goto(f"{live.url}/c/room/")
    page.wait_for_function("() => window.__channelReady === true")
    # Read as seen: the read bar's conversation count drops, and the sidebar's badge for this
    # channel follows at once (not at the sidebar's next poll).
    page.wait_for_function(
        "() => document.body.dataset.navLoaded === '1' &&"
        " +document.getElementById('unread-count').dataset.conversation < 3"
    )
    counts = page.evaluate(
        """() => {
            const here = document.querySelector('#sidebar-list a[aria-current=page] .badge');
            return [document.getElementById('unread-count').dataset.conversation,
                    here ? here.firstChild.textContent : '0'];
        }"""
    )
    assert counts[0] == counts[1], counts
    assert page.locator(".message.compact").count() >= 1
    assert page.locator(".message.compact .record pre").first.is_hidden()  # one line, closed
    page.check("#conversation-only")
    page.wait_for_selector(".message.compact", state="hidden")
    page.uncheck("#conversation-only")
    # Times: relative, the local time readably on hover, a day separator.
    title = page.locator(f"#m-{question['seq']} time").get_attribute("title")
    assert "UTC" not in title and "." not in title.split()[-1], title
    assert page.locator("li.day-sep").first.inner_text() == "Today"
    # The thread page: the same times (times.js), refreshed, and one day separator for the
    # three lists (the day is not repeated across them).
    page.clock.install()
    page.goto(f"{live.url}/c/room/m/{answer['seq']}/")
    assert page.locator("#ancestors li.message").get_attribute("id") == f"m-{question['seq']}"
    assert page.locator("#replies li.message").get_attribute("id") == f"m-{answer['seq'] + 1}"
    stamp = page.locator(f"#m-{answer['seq']} time")
    assert "UTC" not in (stamp.get_attribute("title") or "")
    assert page.locator("li.day-sep").all_inner_texts() == ["Today"]
    assert page.locator("#ancestors li.day-sep").count() == 1
    page.clock.fast_forward("05:00")  # past two of times.js's 30 s refreshes
    page.wait_for_function(
        f"() => /5 min/.test(document.querySelector('#m-{answer['seq']} time').textContent)"
    )
    _no_wider(page)
    _shots(page, "chat-thread")
