"""Presence on the dashboard: sub-agents nested under their parent on the agents page and in a
channel's member list, what the viewer may see only; the loop guard's flag on the channel list
and the channel page."""

from __future__ import annotations

import re

import pytest

from agentchat.core.identity import registry
from agentchat.core.identity.services import agent_get_or_create
from agentchat.dashboard.presence import presence_nested
from channels_app import services
from channels_app.models import Channel

pytestmark = pytest.mark.django_db


def register(name: str, *, harness: str = "claude-code", status: str | None = None) -> None:
    parent = agent_get_or_create(name=name.split(".")[0])
    registry.agent_register(caller=parent, agent=name, harness=harness, substrate="sonnet")


def rows(text: str, tag: str, prefix: str) -> list[str]:
    return re.findall(rf'<{tag} id="{prefix}([a-z0-9._-]+)"', text)


def test_sub_agents_are_nested_under_their_parent():
    people = [
        {"name": n, "kind": k}
        for n, k in [
            ("alice.popper.critic", "agent"),
            ("alice-x", "agent"),
            ("alice", "agent"),
            ("bob", "agent"),
            ("alice.critic", "agent"),
            ("carol.human", "human"),
            ("carol", "agent"),
            ("dan.orphan", "agent"),
        ]
    ]
    ordered = presence_nested(people)
    assert [(p["name"], p["depth"], p["parent"]) for p in ordered] == [
        ("alice", 0, None),
        ("alice.critic", 1, "alice"),
        ("alice.popper.critic", 1, "alice"),
        ("alice-x", 0, None),
        ("bob", 0, None),
        ("carol", 0, None),
        ("carol.human", 0, None),  # a person beside an agent, no sub-agent
        ("dan.orphan", 0, None),
    ]


def test_the_agents_page_nests_sub_agents_with_their_presence(browser, clock, settings):
    register("alice")
    register("alice.critic", harness="critic-loop")
    agent_get_or_create(name="alice-x")
    clock.advance(settings.AGENTCHAT_STALE_SECONDS + 1)
    register("alice.popper")  # fresh, while the others went stale
    text = browser.get("/agents/").content.decode()
    order = rows(text, "tr", "agent-")
    assert order.index("alice") < order.index("alice.critic") < order.index("alice-x")
    critic = text[text.index('id="agent-alice.critic"') :]
    critic = critic[: critic.index("</tr>")]
    assert 'class="depth-1 sub stale"' in critic and 'data-parent="alice"' in critic
    assert "critic-loop" in critic and "presence-stale" in critic and "↳" in critic
    popper = text[text.index('id="agent-alice.popper"') :]
    assert "presence-active" in popper[: popper.index("</tr>")]


def test_a_channel_page_lists_its_members_nested_with_presence(browser, settings):
    register("alice")
    register("alice.critic")
    services.channel_create(name="room", created_by="alice", members=["bob"])
    room = Channel.objects.get(name="room")
    services.message_post(channel=room, sender="alice", title="plan")
    services.message_post(channel=room, sender="alice.critic", title="hi")
    text = browser.get("/c/room/").content.decode()
    assert rows(text, "li", "member-") == ["alice", "alice.critic", "bob"]
    critic = text[text.index('id="member-alice.critic"') :]
    critic = critic[: critic.index("</li>")]
    assert "depth-1 sub" in critic and "presence-active" in critic and "claude-code" in critic
    bob = text[text.index('id="member-bob"') :]
    assert "never registered" in bob[: bob.index("</li>")] and "· member" in bob


def test_a_members_only_channel_shows_nothing_of_its_members_to_others(browser):
    agent_get_or_create(name="carol")
    hidden = services.channel_create(
        name="hid", created_by="carol", members=["carol"], visibility="members"
    )
    services.message_post(channel=hidden, sender="carol", title="secret")
    assert browser.get("/c/hid/").status_code == 404
    agents = browser.get("/agents/").content.decode()
    carol = agents[agents.index('id="agent-carol"') :]
    assert "never" in carol[: carol.index("</tr>")]  # active only where I may not look


def test_a_loop_flag_shows_on_the_channel_list_and_page(browser, settings, clock):
    settings.AGENTCHAT_LOOP_GUARD_MESSAGES = 4
    settings.AGENTCHAT_POST_RATE = ""
    for name in ("ann-bot", "ben-bot"):
        agent_get_or_create(name=name)
    room = services.channel_create(name="loop", created_by="ann-bot")
    calm = services.channel_create(name="calm", created_by="ann-bot")
    for i in range(4):
        services.message_post(channel=room, sender=("ann-bot", "ben-bot")[i % 2], title="re")
        services.message_post(channel=calm, sender="ann-bot", title="note")
    listing = browser.get("/channels/").content.decode()
    loop_item = listing[listing.index('id="channel-loop"') :]
    assert "loop suspected" in loop_item[: loop_item.index("</li>")]
    calm_item = listing[listing.index('id="channel-calm"') :]
    assert "loop suspected" not in calm_item[: calm_item.index("</li>")]
    page = browser.get("/c/loop/").content.decode()
    assert 'id="loop-flag"' in page and "#m-5" in page
    assert 'id="loop-flag"' not in browser.get("/c/calm/").content.decode()
    clock.advance(settings.AGENTCHAT_LOOP_GUARD_COOLDOWN_SECONDS + 1)
    assert 'id="loop-flag"' not in browser.get("/c/loop/").content.decode()
