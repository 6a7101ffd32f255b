"""The client follows the server's pages by their ``more``, never by their length: a peek page
stops at the server's byte budget (AGENTCHAT_READ_MAX_BYTES, about a megabyte) however many
messages were asked for, and an events read pages forward from the start."""

from __future__ import annotations

import asyncio
import json

import pytest

from agentchat.client import ops
from agentchat.client.api import Client
from agentchat.client.mcp_server import Hub, resource_body
from tests.client.cli_run import Agentchat

BIG = 450 * 1024  # three of them are past the byte budget of one page, two are not


@pytest.fixture
def big(live, make_agent, tmp_path):
    """Alice's channel ``big`` with three broadcasts of 450 KB each (one page holds two), and
    bob's ``Agentchat``."""
    _, alice_token = make_agent("alice")
    _, bob_token = make_agent("bob")
    alice = Agentchat(live.url, alice_token, tmp_path)
    assert alice("init", "big").returncode == 0
    with Client(live.url, alice_token) as client:
        for n in range(3):
            client.request(
                "POST", "channels/big/messages/", json={"title": f"m{n}", "body": "x" * BIG}
            )
        # The premise: the server cuts a page of these short and says so.
        page = client.request("GET", "channels/big/messages/", params={"after": 0})
        assert len(page["messages"]) < 3 and page["more"] is True
    return Agentchat(live.url, bob_token, tmp_path), bob_token


def seqs(result) -> list[int]:
    assert result.returncode == 0, result.stderr
    return [m["seq"] for m in json.loads(result.stdout)["messages"]]


def test_read_all_follows_a_page_cut_by_the_byte_budget_and_acks_the_last(big):
    bob, _ = big
    assert seqs(bob("read", "big", "--all", "--peek", "--json")) == [1, 2, 3]
    assert seqs(bob("read", "big", "--peek", "--json")) == [1, 2, 3]
    assert seqs(bob("read", "big", "--all", "--json")) == [1, 2, 3]
    assert json.loads(bob("roster", "big", "--json").stdout)["cursor"] == 3


def test_peek_n_shows_n_messages_when_a_page_is_cut_short(big):
    bob, _ = big
    assert seqs(bob("peek", "big", "-n", "3", "--json")) == [1, 2, 3]
    assert seqs(bob("peek", "big", "-n", "2", "--json")) == [2, 3]
    assert seqs(bob("peek", "big", "-n", "1", "--json")) == [3]
    assert seqs(bob("peek", "big", "-n", "5000", "--json")) == [1, 2, 3]


def test_wait_finds_every_message_past_a_cut_page(live, big):
    _, token = big
    with Client(live.url, token) as client:
        found, seen, more = ops.wait_found(client, "big", "bob", timeout=5)
    assert [m["seq"] for m in found] == [1, 2, 3] and seen == 3 and more is False


def test_the_unread_resource_says_more_when_the_server_cut_its_page(live, big):
    _, token = big
    with Client(live.url, token) as client:
        body = asyncio.run(resource_body(Hub(client, None), "big", unread=True))  # type: ignore[arg-type]
    assert len(body["messages"]) < 3 and body["more"] is True


def test_event_read_prints_every_event_past_one_page(live, make_agent, tmp_path):
    """1,001 events, one more than a page: all printed, in order, from the first."""
    from django.db import transaction

    from channels_app import services
    from channels_app.events import event_request_parse
    from channels_app.models import Channel

    _, token = make_agent("alice")
    alice = Agentchat(live.url, token, tmp_path)
    assert alice("init", "ev").returncode == 0
    channel = Channel.objects.get(name="ev")
    with transaction.atomic():  # one commit: the events' rows are what is tested, not posting
        for n in range(1001):
            body = {"type": "status", "harness": "h", "status": "busy", "detail": f"d{n}"}
            event = event_request_parse(body, agent="alice")
            services.event_post(channel=channel, agent="alice", request=event)
    result = alice("event", "read", "ev", "--json")
    assert result.returncode == 0, result.stderr
    details = [item["event"]["detail"] for item in json.loads(result.stdout)["events"]]
    assert details == [f"d{n}" for n in range(1001)]
    lines = alice("event", "read", "ev").stdout.splitlines()
    assert len(lines) == 1001 and "d0" in lines[0] and "d1000" in lines[-1]


def test_one_relevance_rule_for_the_cli_and_the_mcp_server():
    from agentchat.client import mcp_hub

    assert mcp_hub.relevant is ops.relevant
    assert ops.relevant({"seq": 1, "from": "bob", "to": ["alice"]}, "alice")
    assert not ops.relevant({"seq": 1, "from": "bob", "to": ["carol"]}, "alice")
    assert not ops.relevant({"seq": 1, "from": "alice", "to": []}, "alice")
    # An odd record (no recipients, or not a list of them) counts as a broadcast, unknown
    # identity counts everything: shown rather than a traceback.
    assert ops.relevant({"seq": 1, "from": "bob"}, "alice")
    assert ops.relevant({"seq": 1, "from": "bob", "to": "carol"}, "alice")
    assert ops.relevant({"seq": 1, "from": "alice", "to": []}, None)
