"""A heavy request refused 429 HEAVY_REQUEST_BUSY (this agent's other heavy requests fill the
server's queue; nothing was run) is retried with the backoff within the call's deadline; a
503 WORK_BUDGET_EXCEEDED (the request ran out of its budget, and would again) is not."""

from __future__ import annotations

import pytest

from agentchat.client import ops
from agentchat.client.api import Client
from agentchat.client.errors import ClientError
from tests.client.fake_server import fake_server

PEEK = ("GET", "channels/review/messages/")
PAGE = {"messages": [], "cursor": 0, "more": False}
BUSY = (429, {"error": {"code": "HEAVY_REQUEST_BUSY", "message": "busy", "detail": {"queue": 4}}})
SPENT = (503, {"error": {"code": "WORK_BUDGET_EXCEEDED", "message": "spent", "detail": {}}})


def test_a_busy_heavy_request_is_retried_until_it_is_answered():
    with fake_server({PEEK: [BUSY, BUSY, PAGE]}) as fake, Client(fake.url, "t") as client:
        assert client.request("GET", "channels/review/messages/") == PAGE
        assert fake.seen.count(("GET", "/api/v1/channels/review/messages/")) == 3


def test_a_request_busy_past_its_deadline_fails_transient():
    with (
        fake_server({PEEK: BUSY}) as fake,
        Client(fake.url, "t", call_timeout=0.5) as client,
        pytest.raises(ClientError) as raised,
    ):
        client.request("GET", "channels/review/messages/")
    assert raised.value.code == "HEAVY_REQUEST_BUSY" and raised.value.transient
    # Backoff from 50 ms doubling: a handful of tries within half a second, not a spin.
    assert 1 < len(fake.seen) <= 6


def test_a_spent_work_budget_is_not_retried():
    with (
        fake_server({PEEK: [SPENT, PAGE]}) as fake,
        Client(fake.url, "t") as client,
        pytest.raises(ClientError) as raised,
    ):
        client.request("GET", "channels/review/messages/")
    assert raised.value.code == "WORK_BUDGET_EXCEEDED" and not raised.value.transient
    assert len(fake.seen) == 1


def test_a_waits_first_peek_answered_busy_is_retried():
    with fake_server({PEEK: [BUSY, PAGE]}) as fake, Client(fake.url, "t") as client:
        with pytest.raises(ops.WaitTimeout):
            ops.wait_found(client, "review", "alice", timeout=0)
        assert fake.seen[:2] == [("GET", "/api/v1/channels/review/messages/")] * 2
