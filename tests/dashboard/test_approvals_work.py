"""The pending approvals cost their index entries, never their bodies nor the rest of the
channel (issue 17: 300 requests of 400 KB in one channel made GET /api/v1/approvals/ answer
503 WORK_BUDGET_EXCEEDED even with ``limit=1``, and every dashboard page, /help/ too, stall
~55 s on the navigation's count).

The cause: SQLite uses a partial index only when the query names its condition as written, and
the ORM bound ``'needs-approval'`` as a parameter, so the query walked the channel's messages by
``channel_id`` and, for each request, every message again looking for answers, reading columns
stored after each body (through its overflow pages). Counted here as work, not wall time: the
plan of each query (which index, covering or not), SQLite's virtual machine steps (its
progress handler), the queries and the bodies a page loads.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.db.heavy import budget_check
from channels_app import services
from channels_app.approvals import _pending, approvals_pending, approvals_pending_count
from channels_app.models import Channel
from tests.conftest import PagesClient
from tests.pages import vm_steps

pytestmark = pytest.mark.django_db

BODY = "x" * 40_000  # past a page: the row's later columns sit behind overflow pages


def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's plans and virtual machine steps")


@pytest.fixture
def ops(api_for) -> Channel:
    client = api_for("alice")
    assert client.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    return Channel.objects.get(name="ops")


def requests_post(channel: Channel, count: int, *, body: str = BODY, sender: str = "alice") -> None:
    for i in range(count):
        services.message_post(
            channel=channel, sender=sender, title=f"deploy {i}?", body=body, status="needs-approval"
        )


def chatter_post(channel: Channel, count: int) -> None:
    for i in range(count):
        services.message_post(channel=channel, sender="bob", title=f"chat {i}", body=BODY)


def plan(queryset: Any) -> list[str]:
    sql, params = queryset.query.sql_with_params()  # bound as the ORM binds them
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return [row[3] for row in cursor.fetchall()]


PENDING_QUERIES: list[tuple[str, Callable[[Channel], Any]]] = [
    ("list", lambda ch: _pending("bob", None).order_by("ts", "id").values_list("pk", "json_size")),
    ("channel", lambda ch: _pending("bob", ch).order_by("ts", "id").values_list("pk", "json_size")),
    ("among", lambda ch: _pending("", ch).filter(seq__in=[1, 2, 3]).values_list("seq", flat=True)),
    ("count", lambda ch: _pending("bob", None).order_by().values("pk")[:1001]),
]


@pytest.mark.parametrize("name,query", PENDING_QUERIES, ids=[n for n, _ in PENDING_QUERIES])
def test_what_is_pending_is_decided_from_covering_indexes_only(ops, name, query):
    sqlite_only()
    requests_post(ops, 3, body="short")
    steps = plan(query(ops))
    reads = [s for s in steps if s.startswith(("SEARCH", "SCAN"))]
    message_reads = [s for s in reads if "message" in s]
    assert any("COVERING INDEX message_approval_requests" in s for s in message_reads), steps
    assert any("COVERING INDEX message_approval_deciders" in s for s in message_reads), steps
    # Every read of the messages is one of the two covering indexes: no row is read.
    for step in message_reads:
        assert "COVERING INDEX message_approval_" in step, (step, steps)


def test_the_work_does_not_grow_with_the_channels_other_messages(ops):
    sqlite_only()
    requests_post(ops, 40, body="short")
    with vm_steps() as few:
        approvals_pending(viewer="bob", limit=1)
        approvals_pending_count(viewer="bob")
    chatter_post(ops, 200)
    with vm_steps() as many:
        approvals_pending(viewer="bob", limit=1)
        approvals_pending_count(viewer="bob")
    # Before: every request's answer look-up walked the whole channel (40 x 240 rows).
    assert many[0] <= few[0] * 1.2 + 2, (few, many)


def test_the_work_is_linear_in_the_pending_requests(ops):
    sqlite_only()
    requests_post(ops, 20)
    with vm_steps() as twenty:
        approvals_pending_count(viewer="bob")
    requests_post(ops, 60)
    with vm_steps() as eighty:
        approvals_pending_count(viewer="bob")
    # Linear: about 4x; the quadratic walk of before made it ~16x.
    assert eighty[0] <= twenty[0] * 6 + 4, (twenty, eighty)


def test_limit_one_loads_one_body(ops, api_for):
    requests_post(ops, 30)
    bob = api_for("bob")
    with CaptureQueriesContext(connection) as context:
        r = bob.get("/api/v1/approvals/?limit=1")
    assert r.status_code == 200, r.content
    assert len(r.json()["approvals"]) == 1 and r.json()["more"] is True
    with_bodies = [q["sql"] for q in context.captured_queries if '"body"' in q["sql"]]
    assert len(with_bodies) == 1, with_bodies  # the page's one row, by its key
    assert "IN ('msg_" in with_bodies[0] and with_bodies[0].count("'msg_") == 1


def test_a_page_of_large_requests_stays_within_the_byte_budget(ops, api_for, settings):
    settings.AGENTCHAT_READ_MAX_BYTES = 200_000
    requests_post(ops, 12)
    body = api_for("bob").get("/api/v1/approvals/?limit=100").json()
    assert body["more"] is True
    assert 1 <= len(body["approvals"]) <= 200_000 // len(BODY)


def test_help_page_shows_the_badge_from_the_count(ops, django_user_model):
    requests_post(ops, 3, body="short")
    page = signed_in(django_user_model)
    with CaptureQueriesContext(connection) as context:
        html = page.get("/help/").content.decode()
    assert '<span class="badge">3</span>' in html
    counts = [q["sql"] for q in context.captured_queries if "COUNT(" in q["sql"]]
    assert len(counts) == 1 and '"body"' not in counts[0]


def test_a_page_is_shown_without_the_badge_when_counting_runs_out(
    ops, django_user_model, monkeypatch
):
    requests_post(ops, 3, body="short")
    monkeypatch.setattr("agentchat.dashboard.context.NAV_BUDGET_SECONDS", 0)

    def count_forever(*, viewer: str) -> int:
        budget_check()  # the navigation's budget (0 s) is already spent
        raise AssertionError("the count ran past its budget")

    monkeypatch.setattr("agentchat.dashboard.context.approvals_pending_count", count_forever)
    r = signed_in(django_user_model).get("/help/")
    assert r.status_code == 200
    assert 'id="nav-approvals"' in r.content.decode()
    assert 'class="badge"' not in r.content.decode()


def signed_in(django_user_model) -> PagesClient:
    client = PagesClient()
    client.force_login(django_user_model.objects.create_user("ann", password="pw"))
    return client
