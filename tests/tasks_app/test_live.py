"""Real concurrent clients against a real daphne process on the test database (SQLite by
default, PostgreSQL with DATABASE_URL)."""

from __future__ import annotations

import json
import threading
from concurrent.futures import ThreadPoolExecutor

import httpx

from channels_app.models import Message
from tasks_app.models import Lease, LeaseHistory, Task
from tests.conftest import auth

CLAIMANTS = 16


def _post(live, token: str, path: str, body: dict) -> httpx.Response:
    return httpx.post(f"{live.url}/api/v1/{path}", json=body, headers=auth(token), timeout=60)


def _together(live, tokens: list[str], call) -> list[httpx.Response]:
    """Run ``call(http_client, index)`` for every token at once, each on its own connection."""
    barrier = threading.Barrier(len(tokens))

    def run(index: int) -> httpx.Response:
        with httpx.Client(base_url=live.url, headers=auth(tokens[index]), timeout=60) as http:
            barrier.wait()
            return call(http, index)

    with ThreadPoolExecutor(len(tokens)) as pool:
        return list(pool.map(run, range(len(tokens))))


def test_sixteen_concurrent_claimants_of_one_task_have_exactly_one_owner(live, make_agent):
    agents = [f"claimant{i:02d}" for i in range(CLAIMANTS)]
    tokens = [make_agent(name)[1] for name in agents]
    assert _post(live, tokens[0], "channels/", {"name": "race"}).status_code == 201
    r = _post(live, tokens[0], "channels/race/tasks/", {"id": "T-1", "title": "contested"})
    assert r.status_code == 201, r.text

    responses = _together(
        live,
        tokens,
        lambda http, _: http.post(
            "/api/v1/channels/race/tasks/T-1/claim/", json={"lease_seconds": 600}
        ),
    )

    winners = [r for r in responses if r.status_code == 200]
    losers = [r for r in responses if r.status_code != 200]
    assert len(winners) == 1, [r.text for r in responses]
    owner = winners[0].json()["owner"]
    assert owner in agents
    assert winners[0].json()["lease"]["owner"] == owner
    assert len(losers) == CLAIMANTS - 1
    for r in losers:
        assert r.status_code == 409, r.text
        assert r.json()["error"]["code"] == "LEASE_CONFLICT"
        assert r.json()["error"]["message"] == f"task T-1 is leased by {owner}"

    task = Task.objects.get(task_id="T-1")
    assert (task.status, task.owner) == ("in_progress", owner)
    assert Lease.objects.get().owner == owner
    assert LeaseHistory.objects.count() == 1
    claimed = Message.objects.filter(channel__name="race", status="lease.claimed")
    assert [(m.sender, json.loads(m.body)["lease_owner"]) for m in claimed] == [(owner, owner)]
    assert Message.objects.filter(channel__name="race", kind=Message.Kind.AUDIT).count() == 2
    assert "database is locked" not in live.output()


def test_concurrent_dependency_updates_cannot_close_a_cycle(live, make_agent):
    """A -> B and B -> A written at once: one wins, the other sees it and is refused."""
    _, alice = make_agent("alice")
    _, bob = make_agent("bob")
    assert _post(live, alice, "channels/", {"name": "graph"}).status_code == 201
    for task_id in ("A", "B"):
        r = _post(live, alice, "channels/graph/tasks/", {"id": task_id, "title": ""})
        assert r.status_code == 201, r.text

    edges = [("A", "B"), ("B", "A")]
    responses = _together(
        live,
        [alice, bob],
        lambda http, i: http.patch(
            f"/api/v1/channels/graph/tasks/{edges[i][0]}/", json={"depends_on": [edges[i][1]]}
        ),
    )
    assert sorted(r.status_code for r in responses) == [200, 409]
    refused = next(r for r in responses if r.status_code == 409)
    assert refused.json()["error"]["code"] == "TASK_DEPENDENCY_CYCLE"
    assert Message.objects.filter(channel__name="graph", status="task.updated").count() == 1


def test_hostile_ids_and_filters_get_clean_400s_through_the_server(live, make_agent):
    """Through daphne and the API lane (the path clients take), percent-escapes in the path
    and the query decode to controls, look-alikes or replacement characters: each is a 400
    with its code, never a 500."""
    _, token = make_agent("alice")
    log_start = len(live.output())
    assert _post(live, token, "channels/", {"name": "hostile"}).status_code == 201
    base = f"{live.url}/api/v1/channels/hostile/tasks/"
    with httpx.Client(headers=auth(token), timeout=60) as http:
        for segment in ["T%0A", "T%00", "%ED%A0%80", "%FF", "T-%D9%A1", "T%E2%80%A8", "a" * 3000]:
            for response in (http.get(f"{base}{segment}/"), http.post(f"{base}{segment}/claim/")):
                assert response.status_code == 400, (segment, response.text)
                assert response.json()["error"]["code"] == "TASK_INVALID_ID"
        for query, code in [
            ("owner=%00", "TASK_INVALID_OWNER"),
            ("owner=alice%0A", "TASK_INVALID_OWNER"),
            ("owner=%ED%A0%80", "TASK_INVALID_OWNER"),
            ("status=%FF", "TASK_INVALID_STATUS"),
            ("status=open%00", "TASK_INVALID_STATUS"),
        ]:
            response = http.get(f"{base}?{query}")
            assert response.status_code == 400, (query, response.text)
            assert response.json()["error"]["code"] == code
        response = http.post(base, json={"id": "T", "title": "x", "owner": "alice\n"})
        assert response.json()["error"]["code"] == "TASK_INVALID_OWNER"
    assert not Task.objects.filter(channel__name="hostile").exists()
    assert "Traceback" not in live.output()[log_start:]
