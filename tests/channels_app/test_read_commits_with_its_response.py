"""A read or wait that fails for any reason moves no cursor: the page is
rendered inside the transaction that moves the cursor. The failure is made real with a row
that JSON cannot carry, written to the database directly, past every validation."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from django.db import connection

from channels_app import live
from channels_app.models import Cursor, Message
from channels_app.selectors import cursor_get
from channels_app.services import channel_create, message_post
from tests.conftest import ServerProcess, auth


def poison(seq: int) -> None:
    """Store a number that cannot be read back and sent in a message's data: 1e5000, which
    SQLite gives back as infinity (JSON has no spelling for it) and PostgreSQL as an integer of
    5,001 digits (more than Python converts)."""
    table = Message._meta.db_table
    value = "CAST(%s AS jsonb)" if connection.vendor == "postgresql" else "%s"
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table} SET data = {value} WHERE seq = %s", ["1e5000", seq])


def heal(seq: int) -> None:
    Message.objects.filter(seq=seq).update(data=None)


@pytest.fixture
def batch(db, make_agent):
    make_agent("alice")
    bob, _ = make_agent("bob")
    channel = channel_create(name="poison", created_by="alice")
    for title in ("one", "two", "three"):
        message_post(channel=channel, sender="alice", title=title, to="bob")
    poison(2)
    return channel, bob


@pytest.mark.django_db
def test_a_read_that_cannot_be_rendered_moves_no_cursor(batch, api_for):
    channel, bob = batch
    client = api_for("bob")
    client.raise_request_exception = False
    r = client.post("/api/v1/channels/poison/read/")
    assert r.status_code == 500
    assert cursor_get(agent=bob, channel=channel) == 0
    assert not Cursor.objects.exists()
    heal(2)
    r = client.post("/api/v1/channels/poison/read/")
    assert [m["title"] for m in r.json()["messages"]] == ["one", "two", "three"]
    assert r.json()["cursor"] == 3


@pytest.mark.django_db(transaction=True)
def test_a_wait_that_cannot_be_rendered_moves_no_cursor(batch):
    channel, bob = batch

    async def wait():
        return await live.message_wait(channel=channel, agent=bob, timeout=5)

    with pytest.raises(ValueError):
        asyncio.run(wait())
    assert cursor_get(agent=bob, channel=channel) == 0
    heal(2)
    result = json.loads(asyncio.run(wait()).body())
    assert [m["title"] for m in result["messages"]] == ["one", "two", "three"]
    assert cursor_get(agent=bob, channel=channel) == 3


def test_over_http_the_failure_is_a_clean_500_and_the_batch_comes_later(
    transactional_db, make_agent
):
    _, alice = make_agent("alice")
    bob, bob_token = make_agent("bob")
    # A server of its own: the 500s below are logged with their tracebacks, as they should be.
    server = ServerProcess()
    try:
        scenario(server, alice, bob, bob_token)
    finally:
        server.stop()


def scenario(server, alice, bob, bob_token):
    with httpx.Client(base_url=f"{server.url}/api/v1/channels/", timeout=30) as http:
        assert http.post("", json={"name": "poison"}, headers=auth(alice)).status_code == 201
        for title in ("one", "two"):
            http.post("poison/messages/", json={"title": title}, headers=auth(alice))
        poison(1)
        for attempt in (
            lambda: http.post("poison/read/", headers=auth(bob_token)),
            lambda: http.get("poison/wait/", params={"timeout": 1}, headers=auth(bob_token)),
        ):
            r = attempt()
            assert (r.status_code, r.json()["error"]["code"]) == (500, "INTERNAL_ERROR")
            assert not Cursor.objects.filter(agent=bob).exists()
        heal(1)
        r = http.get("poison/wait/", params={"timeout": 1}, headers=auth(bob_token))
        assert [m["title"] for m in r.json()["messages"]] == ["one", "two"]
    assert Cursor.objects.get(agent=bob).seq == 2
