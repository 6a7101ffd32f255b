"""Several hosts on one machine (docs/deployment.md): two app hosts, a db host with PostgreSQL
and Redis, a proxy host with nginx (deploy/nginx-agentchat.conf) and the client host, each a
network namespace (tests/deploy/network.py). Posts, waits, websocket pushes, claims, locks,
revocation and ``sync_folder --follow`` behave alike whichever host a client hits, and a
deploy roll (each app host stopped with SIGTERM and started again) loses and doubles no post
and answers a parked wait.

The stream sweep is set to an hour: a wait or a websocket on one host that sees a post made
on another was rung through Redis, not found by its periodic look.

It runs in the PostgreSQL suite only (the db host's database is a copy of that suite's
migrated test database, in a second; the SQLite suite has none), as tests/faults/ does; it
needs root, ``ip`` and nginx, and skips without them, or fails under
AGENTCHAT_REQUIRE_SERVICES=1 (CI).
"""

from __future__ import annotations

import json
import sys
import threading
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.db import connection
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

from agentchat.client.api import Client
from tests.deploy.network import Cluster, agents_make
from tests.signals import wait_until

NAMES = ["alice", "bob", "carol", "dave", "eve"]
# The suite's test database is only made when a test asks for one: the cluster copies it.
pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def cluster(django_db_setup: Any, django_db_blocker: Any) -> Iterator[Cluster]:
    if connection.vendor != "postgresql":
        pytest.skip("the PostgreSQL suite runs it (see the module's docstring)")
    import os

    os.environ["AGENTCHAT_STREAM_SWEEP_SECONDS"] = "3600"  # only a ring wakes a session
    try:
        with django_db_blocker.unblock():
            made = Cluster(apps=2)
    finally:
        del os.environ["AGENTCHAT_STREAM_SWEEP_SECONDS"]
    try:
        made.tokens = agents_make(made, NAMES)
        yield made
    finally:
        made.close()


def entries(cluster: Cluster) -> list[str]:
    """Where a client may send a request: each app host, and the proxy."""
    return [*(server.url for server in cluster.apps), cluster.proxy_url]


def call(url: str, token: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method,
        f"{url}/api/v1/{path}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )


def channel(cluster: Cluster, name: str) -> None:
    r = call(cluster.apps[0].url, cluster.tokens["alice"], "POST", "channels/", {"name": name})
    assert r.status_code == 201, r.text


def ws(url: str, token: str, name: str, since: int) -> ClientConnection:
    return connect(
        f"{url}/ws/channels/{name}/?since={since}",
        additional_headers={"Authorization": f"Bearer {token}"},
        open_timeout=15,
        legacy=True,  # closed by the test, not a with block
    )


def frame_seqs(socket: ClientConnection, count: int) -> list[int]:
    seqs: list[int] = []
    while len(seqs) < count:
        data = json.loads(socket.recv(timeout=20))
        if data.get("type") == "message":
            seqs.append(data["message"]["seq"])
    return seqs


def test_posts_reads_waits_and_pushes_cross_hosts(cluster: Cluster) -> None:
    tokens = cluster.tokens
    channel(cluster, "hosts")
    where = entries(cluster)
    a_url = cluster.apps[0]
    b_url = cluster.apps[1]
    sockets = [ws(u.replace("http", "ws", 1), tokens["bob"], "hosts", 0) for u in where]
    try:
        posted: list[int] = []
        for writer in where:
            for reader in where:
                title = f"from {writer} for {reader}"
                r = call(writer, tokens["alice"], "POST", "channels/hosts/messages/",
                         {"title": title, "body": "b"})  # fmt: skip
                assert r.status_code == 201, r.text
                seq = r.json()["seq"]
                posted.append(seq)
                page = call(
                    reader, tokens["bob"], "GET", f"channels/hosts/messages/?after={seq - 1}"
                )
                assert [m["title"] for m in page.json()["messages"]] == [title]
        # Every websocket, whichever host it is on, got every post, in seq order, once.
        for socket in sockets:
            assert frame_seqs(socket, len(posted)) == posted
    finally:
        for socket in sockets:
            socket.close()
    # A wait parked on host B is answered by a post through host A (and the other way).
    for waiter, writer in (
        (b_url.url, a_url.url),
        (a_url.url, b_url.url),
        (cluster.proxy_url, a_url.url),
    ):
        top = max(posted)
        r = call(waiter, tokens["bob"], "POST", "channels/hosts/ack/", {"seq": top})
        assert r.status_code == 200, r.text
        answered: dict[str, Any] = {}

        def wait(waiter: str = waiter, answered: dict[str, Any] = answered) -> None:
            answered["r"] = call(waiter, tokens["bob"], "GET", "channels/hosts/wait/?timeout=20")

        thread = threading.Thread(target=wait)
        thread.start()
        r = call(writer, tokens["alice"], "POST", "channels/hosts/messages/",
                 {"title": f"wake {waiter}", "to": ["bob"]})  # fmt: skip
        assert r.status_code == 201
        posted.append(r.json()["seq"])
        thread.join(30)
        body = answered["r"].json()
        assert answered["r"].status_code == 200, body
        assert [m["title"] for m in body["messages"]] == [f"wake {waiter}"], (top, body)


def test_claims_and_locks_have_one_winner_across_hosts(cluster: Cluster) -> None:
    tokens = cluster.tokens
    channel(cluster, "claims")
    a, b = (server.url for server in cluster.apps)
    for i in range(4):
        r = call(
            a, tokens["alice"], "POST", "channels/claims/tasks/", {"id": f"t{i}", "title": "t"}
        )
        assert r.status_code == 201, r.text

    def race(requests: list[tuple[str, str, str, Any]]) -> list[httpx.Response]:
        barrier = threading.Barrier(len(requests))
        answers: list[Any] = [None] * len(requests)

        def one(k: int) -> None:
            url, who, path, body = requests[k]
            barrier.wait()
            answers[k] = call(url, tokens[who], "POST", path, body)

        threads = [threading.Thread(target=one, args=(k,)) for k in range(len(requests))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        return answers

    for i in range(4):
        path = f"channels/claims/tasks/t{i}/claim/"
        answers = race([(a, "carol", path, {}), (b, "dave", path, {})])
        codes = sorted(r.status_code for r in answers)
        assert codes == [200, 409], [r.text for r in answers]
        loser = next(r for r in answers if r.status_code == 409)
        assert loser.json()["error"]["code"] == "LEASE_CONFLICT"
    for i in range(4):
        body = {"paths": [f"src/m{i}.py"]}
        answers = race([(a, "carol", "channels/claims/locks/", body),
                        (b, "dave", "channels/claims/locks/", body)])  # fmt: skip
        codes = sorted(r.status_code for r in answers)
        assert codes == [201, 409], [r.text for r in answers]
        loser = next(r for r in answers if r.status_code == 409)
        assert loser.json()["error"]["code"] == "PATH_LOCK_CONFLICT"


def test_a_token_revoked_through_one_host_ends_on_the_other(cluster: Cluster) -> None:
    tokens = cluster.tokens
    channel(cluster, "revoked")
    a, b = cluster.apps
    socket = ws(b.ws_url, tokens["eve"], "revoked", 0)
    try:
        assert call(b.url, tokens["eve"], "GET", "me/").status_code == 200
        revoke = cluster.in_host(
            "app0",
            [sys.executable, "manage.py", "revoke_agent_tokens", "eve"],
            stdout=-1,
            stderr=-1,
        )
        _, err = revoke.communicate(timeout=60)
        assert revoke.returncode == 0, err
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                socket.recv(timeout=20)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 4401
        for url in (a.url, b.url, cluster.proxy_url):
            r = call(url, tokens["eve"], "GET", "me/")
            assert r.status_code == 401 and r.json()["error"]["code"] == "AUTH_INVALID"
    finally:
        socket.close()


def test_follow_sync_on_one_host_sees_posts_through_every_host(cluster: Cluster) -> None:
    tokens = cluster.tokens
    channel(cluster, "followed")
    folder = cluster.root / "folder"
    follower = cluster.in_host(
        "app1",
        [sys.executable, "manage.py", "sync_folder", "--root", str(folder), "--follow",
         "--interval", "3600"],
        stdout=-1,
        stderr=-1,
    )  # fmt: skip
    try:
        for k, url in enumerate(entries(cluster)):
            r = call(url, tokens["alice"], "POST", "channels/followed/messages/",
                     {"title": f"followed {k}", "body": f"through {url}"})  # fmt: skip
            assert r.status_code == 201, r.text

            def synced(k: int = k) -> bool:
                assert follower.poll() is None, follower.communicate()
                files = list((folder / "followed").glob("*.md")) if folder.exists() else []
                return any(f"followed {k}" in path.read_text() for path in files)

            wait_until(synced, timeout=20, what=f"the follow sync wrote post {k}")
    finally:
        follower.terminate()
        _, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err


def test_a_deploy_roll_loses_no_post_and_answers_a_parked_wait(cluster: Cluster) -> None:
    tokens = cluster.tokens
    channel(cluster, "roll")
    channel(cluster, "roll-wait")
    stop = threading.Event()
    acked: list[str] = []
    failures: list[str] = []

    def poster() -> None:
        # The CLI's post (agentchat post): an id of its own, retried on 502/503/a drop.
        with Client(cluster.proxy_url, tokens["carol"], call_timeout=30) as client:
            while not stop.is_set():
                title = f"roll {len(acked)}"
                try:
                    client.request("POST", "channels/roll/messages/", retry=True,
                                   json={"id": str(uuid.uuid4()), "title": title})  # fmt: skip
                    acked.append(title)
                except Exception as exc:
                    failures.append(repr(exc))
                    return

    waited: dict[str, Any] = {}

    def waiter() -> None:
        with Client(cluster.proxy_url, tokens["bob"], call_timeout=60) as client:
            try:
                waited["answer"] = client.request(
                    "GET", "channels/roll-wait/wait/", params={"timeout": 45}, retry=True
                )
            except Exception as exc:
                waited["error"] = repr(exc)

    threads = [threading.Thread(target=poster), threading.Thread(target=waiter)]
    for t in threads:
        t.start()
    try:
        wait_until(lambda: len(acked) >= 5 or failures, timeout=30, what="posts before the roll")
        for k in range(len(cluster.apps)):
            before = len(acked)
            took = cluster.apps[k].stop(timeout=15)  # SIGTERM: the process drains
            assert took is not None, "the drained process did not exit by itself"
            cluster.apps[k] = cluster.app_start(k)
            wait_until(lambda b=before: len(acked) >= b + 3 or failures, timeout=30,
                       what="posts during the roll")  # fmt: skip
        r = call(cluster.apps[0].url, tokens["alice"], "POST", "channels/roll-wait/messages/",
                 {"title": "after the roll", "to": ["bob"]})  # fmt: skip
        assert r.status_code == 201
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert not failures, failures
    assert "error" not in waited, waited
    assert [m["title"] for m in waited["answer"]["messages"]] == ["after the roll"]
    page = call(cluster.proxy_url, tokens["carol"], "GET", "channels/roll/messages/?limit=1000")
    titles = [m["title"] for m in page.json()["messages"] if m["title"].startswith("roll ")]
    assert sorted(titles) == sorted(acked), "a post was lost or stored twice"
    assert len(set(titles)) == len(titles)
