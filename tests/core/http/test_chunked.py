"""Chunked request bodies (``Transfer-Encoding: chunked``, no Content-Length) reach every write
endpoint whole: each request below carries a body whose content shows in the answer or in
the database, so a body read as empty cannot pass."""

from __future__ import annotations

import json
from datetime import timedelta

import httpx
import pytest
from django.utils import timezone

from channels_app.models import Cursor, Message
from locks_app.models import PathLock
from tasks_app.models import Lease, Task
from tests.conftest import auth
from tests.errors import error_code as code
from tests.signals import wait_until


def chunked(http: httpx.Client, method: str, path: str, body: dict) -> httpx.Response:
    raw = json.dumps(body).encode()

    def pieces():
        yield raw[:3]
        yield raw[3:]

    r = http.request(method, path, content=pieces(), headers={"Content-Type": "application/json"})
    assert r.request.headers["Transfer-Encoding"] == "chunked"
    assert "Content-Length" not in r.request.headers
    return r


# Until expiry uses the precise clock everywhere, "now" may be cut to the second on the server.
SERVER_CLOCK_STEP = timedelta(seconds=1.1)


def expires_within(moment, seconds: float) -> bool:
    left = (moment - timezone.now()).total_seconds()
    return 0 < left <= seconds  # the default lease is 300 s


@pytest.fixture
def clients(live, make_agent):
    tokens = {name: make_agent(name)[1] for name in ("alice", "bob")}
    made = {
        name: httpx.Client(base_url=f"{live.url}/api/v1/", headers=auth(token), timeout=30)
        for name, token in tokens.items()
    }
    yield made
    for client in made.values():
        client.close()


def test_channel_endpoints_read_chunked_bodies(clients):
    alice, bob = clients["alice"], clients["bob"]
    r = chunked(alice, "POST", "channels/", {"name": "chunky", "topic": "first"})
    assert (r.status_code, r.json()["name"], r.json()["topic"]) == (201, "chunky", "first")
    r = chunked(alice, "PATCH", "channels/chunky/", {"topic": "second"})
    assert (r.status_code, r.json()["topic"]) == (200, "second")  # audited as #1
    for i in range(5):
        r = chunked(alice, "POST", "channels/chunky/messages/", {"title": f"m{i}", "to": "bob"})
        assert (r.status_code, r.json()["to"]) == (201, ["bob"])
    r = chunked(bob, "POST", "channels/chunky/ack/", {"seq": 3})
    assert (r.status_code, r.json()) == (200, {"cursor": 3})
    assert Cursor.objects.get(agent__name="bob").seq == 3  # not 6, the default
    # Endpoints that take no fields: a field sent chunked is seen, and refused.
    r = chunked(bob, "POST", "channels/chunky/read/", {"nope": 1})
    assert (r.status_code, code(r)) == (400, "UNKNOWN_FIELD")
    assert Cursor.objects.get(agent__name="bob").seq == 3
    r = chunked(bob, "POST", "channels/chunky/claims/m1/", {"nope": 1})
    assert (r.status_code, code(r)) == (400, "UNKNOWN_FIELD")
    r = chunked(bob, "POST", "channels/chunky/read/", {})
    assert [m["seq"] for m in r.json()["messages"]] == [4, 5, 6]
    r = chunked(bob, "POST", "channels/chunky/claims/m1/", {})
    assert (r.status_code, r.json()["owner"]) == (201, "bob")
    assert Message.objects.filter(channel__name="chunky").count() == 6


def test_task_endpoints_read_chunked_bodies(clients):
    alice, bob = clients["alice"], clients["bob"]
    assert chunked(alice, "POST", "channels/", {"name": "work"}).status_code == 201
    base = "channels/work/tasks/"
    r = chunked(alice, "POST", base, {"id": "T-1", "title": "first", "branch": "b1"})
    assert (r.status_code, r.json()["id"], r.json()["branch"]) == (201, "T-1", "b1")
    r = chunked(alice, "PATCH", base + "T-1/", {"title": "renamed"})
    assert (r.status_code, r.json()["title"]) == (200, "renamed")
    r = chunked(alice, "POST", base + "T-1/claim/", {"lease_seconds": 5})
    assert r.status_code == 200, r.text
    assert expires_within(Lease.objects.get().lease_expires_at, 6)
    r = chunked(alice, "POST", base + "T-1/renew/", {"lease_seconds": 7})
    assert r.status_code == 200, r.text
    left = (Lease.objects.get().lease_expires_at - timezone.now()).total_seconds()
    assert 5 < left <= 8
    for action in ("done", "release", "block"):
        r = chunked(alice, "POST", f"{base}T-1/{action}/", {"nope": 1})
        assert r.status_code == 400 and code(r).endswith("UNKNOWN_FIELD"), (action, r.text)
    r = chunked(alice, "POST", base + "recover-pending/", {"nope": 1})
    assert r.status_code == 400 and code(r).endswith("UNKNOWN_FIELD"), r.text
    # Recover: an expired lease, a reason and a duration, all from the chunked body.
    r = chunked(alice, "POST", base + "T-1/renew/", {"lease_seconds": 0.05})
    assert r.status_code == 200, r.text
    expiry = Lease.objects.get().lease_expires_at
    wait_until(lambda: timezone.now() > expiry + SERVER_CLOCK_STEP)
    r = chunked(bob, "POST", base + "T-1/recover/", {"reason": "stale worker", "lease_seconds": 5})
    assert r.status_code == 200, r.text
    lease = Lease.objects.get()
    assert (lease.owner, lease.recovery_reason) == ("bob", "stale worker")
    assert expires_within(lease.lease_expires_at, 6)
    r = chunked(bob, "POST", base + "T-1/done/", {})
    assert (r.status_code, Task.objects.get().status) == (200, "done")


def test_lock_endpoints_read_chunked_bodies(clients):
    alice, bob = clients["alice"], clients["bob"]
    assert chunked(alice, "POST", "channels/", {"name": "tree"}).status_code == 201
    base = "channels/tree/locks/"
    r = chunked(alice, "POST", base, {"paths": ["src/a.py"], "lease_seconds": 5})
    assert r.status_code == 201, r.text
    lock_id = r.json()["lock_id"]
    assert expires_within(PathLock.objects.get().expires_at, 6)
    r = chunked(bob, "POST", base + "check/", {"paths": ["src"]})
    assert [c["lock_id"] for c in r.json()["conflicts"]] == [lock_id]
    r = chunked(alice, "POST", base, {"paths": ["docs"], "lease_seconds": 0.05})
    docs_id = r.json()["lock_id"]
    expiry = PathLock.objects.get(lock_id=docs_id).expires_at
    wait_until(lambda: timezone.now() > expiry + SERVER_CLOCK_STEP)
    r = chunked(bob, "POST", f"{base}{docs_id}/recover/", {"reason": "gone", "lease_seconds": 5})
    assert r.status_code == 200, r.text
    recovered = PathLock.objects.get(lock_id=docs_id)
    assert (recovered.owner, recovered.recovery_reason) == ("bob", "gone")
    assert expires_within(recovered.expires_at, 6)
    # DELETE takes no body; sent chunked anyway it changes nothing about the request.
    r = chunked(alice, "DELETE", f"{base}{lock_id}/", {})
    assert (r.status_code, r.json()["lock_id"]) == (200, lock_id)
    r = chunked(bob, "DELETE", f"{base}?path=docs", {})
    assert (r.status_code, r.json()["lock_id"]) == (200, docs_id)
    assert not PathLock.objects.exists()
