from __future__ import annotations

import httpx

from tests.conftest import auth


def test_live_server_posts_and_reads(live, make_agent):
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": "smoke"}, headers=auth(alice))
    assert r.status_code == 201, r.text
    r = httpx.post(
        f"{live.url}/api/v1/channels/smoke/messages/", json={"title": "hi"}, headers=auth(alice)
    )
    assert r.status_code == 201
    r = httpx.post(f"{live.url}/api/v1/channels/smoke/read/", headers=auth(bob))
    assert r.json()["cursor"] == 1
    assert [m["title"] for m in r.json()["messages"]] == ["hi"]
