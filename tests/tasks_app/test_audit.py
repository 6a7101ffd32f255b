"""Audit messages: one per successful mutation, none for a failed one, committed with the change
or not at all, and byte-equal to what the reference CLI wrote for the same events."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from channels_app.models import Message
from channels_app.selectors import channel_get
from tasks_app import records, selectors, services
from tasks_app.models import Lease, LeaseHistory, Task
from tests.tasks_app.helpers import (
    FIVE_MINUTES,
    act,
    acted,
    audits,
    create,
    created,
    unchanged,
    update,
    updated,
)

pytestmark = pytest.mark.django_db

REFERENCE = Path(__file__).parent / "reference" / "backend"
YEAR = 31536000


def _setup_open(alice, bob) -> None:
    created(alice, "T")


def _setup_leased(alice, bob) -> None:
    created(alice, "T")
    acted(bob, "T", "claim", {"lease_seconds": 60})


def _setup_in_progress(alice, bob) -> None:
    created(alice, "T")
    updated(alice, "T", status="in_progress")


# (name, setup, who, call) -> expected (event, sender)
MUTATIONS = [
    ("create", None, lambda c: create(c, "T"), "task.created", 201),
    ("update", _setup_open, lambda c: update(c, "T", title="x"), "task.updated", 200),
    (
        "same-state update",
        _setup_open,
        lambda c: update(c, "T", status="open"),
        "task.updated",
        200,
    ),
    ("block", _setup_open, lambda c: act(c, "T", "block"), "task.updated", 200),
    ("claim", _setup_open, lambda c: act(c, "T", "claim"), "lease.claimed", 200),
    ("renew", _setup_leased, lambda c: act(c, "T", "renew"), "lease.renewed", 200),
    ("done leased", _setup_leased, lambda c: act(c, "T", "done"), "lease.completed", 200),
    ("release leased", _setup_leased, lambda c: act(c, "T", "release"), "lease.released", 200),
    ("done unleased", _setup_in_progress, lambda c: act(c, "T", "done"), "task.updated", 200),
    ("release unleased", _setup_open, lambda c: act(c, "T", "release"), "task.updated", 200),
]


@pytest.mark.parametrize(
    ("setup", "call", "event", "status"),
    [m[1:] for m in MUTATIONS],
    ids=[m[0] for m in MUTATIONS],
)
def test_every_mutation_posts_exactly_one_audit_message(
    alice, bob, backend, setup, call, event, status
):
    if setup is not None:
        setup(alice, bob)
    before = audits()
    response = call(bob)
    assert response.status_code == status, response.content
    new = audits()[len(before) :]
    assert len(new) == 1
    message = new[0]
    assert (message.sender, message.status, message.title, message.to, message.kind) == (
        "bob",
        event,
        f"{event} T",
        [],
        Message.Kind.AUDIT,
    )
    payload = json.loads(message.body)
    assert message.body == json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False)
    assert payload["event"] == event
    assert {"channel", "event", "lease_expires_at", "owner", "status", "task_id", "updated_at"} <= (
        set(payload)
    )


def test_recover_posts_exactly_one_audit_message(alice, bob, carol, backend, clock):
    _setup_leased(alice, bob)
    clock.advance(60)
    before = len(audits())
    acted(carol, "T", "recover", {"reason": "stale"})
    assert [(m.sender, m.status) for m in audits()[before:]] == [("carol", "lease.recovered")]


FAILURES = [
    ("create duplicate", _setup_open, lambda c: create(c, "T"), 409),
    ("create bad id", None, lambda c: create(c, "bad id"), 400),
    ("update transition", _setup_open, lambda c: update(c, "T", status="done"), 409),
    ("update empty", _setup_open, lambda c: update(c, "T"), 400),
    ("block non-owner", _setup_leased, lambda c: act(c, "T", "block"), 403),
    ("claim conflict", _setup_leased, lambda c: act(c, "T", "claim"), 409),
    ("claim duration", _setup_open, lambda c: act(c, "T", "claim", {"lease_seconds": 0}), 400),
    ("renew non-owner", _setup_leased, lambda c: act(c, "T", "renew"), 403),
    ("done non-owner", _setup_leased, lambda c: act(c, "T", "done"), 403),
    ("release non-owner", _setup_leased, lambda c: act(c, "T", "release"), 403),
    ("recover unexpired", _setup_leased, lambda c: act(c, "T", "recover", {"reason": "r"}), 409),
    ("recover no reason", _setup_leased, lambda c: act(c, "T", "recover"), 400),
    (
        "recover-pending",
        None,
        lambda c: c.post("/api/v1/channels/backend/tasks/recover-pending/"),
        409,
    ),
]


@pytest.mark.parametrize(
    ("setup", "call", "status"), [f[1:] for f in FAILURES], ids=[f[0] for f in FAILURES]
)
def test_a_failed_mutation_posts_no_audit_message(alice, bob, carol, backend, setup, call, status):
    if setup is not None:
        setup(alice, bob)
    with unchanged():
        response = call(carol)
        assert response.status_code == status, response.content


# --- the change and its audit commit together ----------------------------------------------------


class AuditDown(Exception):
    pass


@pytest.fixture
def audit_fails(monkeypatch):
    def fail(**kwargs):
        raise AuditDown("audit store unavailable")

    monkeypatch.setattr(services.audit, "audit_post", fail)


def test_when_the_audit_fails_a_create_is_rolled_back(alice, backend, audit_fails):
    channel = channel_get("backend", viewer="alice")
    with unchanged(), pytest.raises(AuditDown):
        services.task_create(channel=channel, task_id="T", title="t", created_by="alice")
    assert not Task.objects.exists()


def test_when_the_audit_fails_a_claim_is_rolled_back(alice, bob, backend, monkeypatch):
    created(alice, "T")
    channel = channel_get("backend", viewer="alice")

    def fail(**kwargs):
        raise AuditDown("audit store unavailable")

    monkeypatch.setattr(services.audit, "audit_post", fail)
    with unchanged(), pytest.raises(AuditDown):
        services.lease_claim(channel=channel, task_id="T", actor="bob", duration=FIVE_MINUTES)
    assert not Lease.objects.exists()
    assert not LeaseHistory.objects.exists()


def test_when_the_audit_fails_a_recover_is_rolled_back(alice, bob, backend, clock, monkeypatch):
    _setup_leased(alice, bob)
    clock.advance(60)
    monkeypatch.setattr(
        services.audit, "audit_post", lambda **kw: (_ for _ in ()).throw(AuditDown())
    )
    with unchanged(), pytest.raises(AuditDown):
        services.lease_recover(
            channel=channel_get("backend", viewer="alice"),
            task_id="T",
            actor="carol",
            reason="stale",
            duration=FIVE_MINUTES,
        )
    assert Lease.objects.get().owner == "bob"


# --- byte-compatibility with the reference CLI's folder -----------------------------------------


def _message_file(path: Path) -> tuple[dict[str, str], str]:
    text = path.read_text(encoding="utf-8")
    _, front, body = text.split("---\n", 2)
    headers = dict(line.split(": ", 1) for line in front.splitlines())
    return headers, body.rstrip("\n")


def _at(clock, hh_mm_ss: str) -> None:
    h, m, s = (int(part) for part in hh_mm_ss.split(":"))
    # Whole seconds: the reference's clock cuts now to the second, so these are the instants
    # its records were written at (ours keep a fraction, from the precise clock: see
    # test_leases; here the spellings of the same instants are compared byte for byte).
    clock.current = datetime(2026, 11, 29, h, m, s, tzinfo=UTC)


def test_replaying_the_reference_sample_gives_its_audit_messages_and_records(
    api_for, clock, settings
):
    """The tasks part of ``shared/reference/scripts/gen_sample.sh``, at the fixture's times."""
    settings.AGENTCHAT_MAX_LEASE_SECONDS = YEAR  # the sample's leases last a year
    alice, bob, carol = api_for("alice"), api_for("bob"), api_for("carol")
    assert alice.post("/api/v1/channels/", {"name": "backend"}, format="json").status_code == 201
    _at(clock, "15:46:18")
    created(
        alice,
        "T-0001",
        title="Design payments schema",
        owner="bob",
        files_hint=["db/schema.sql"],
        acceptance=["migration applies cleanly", "reviewed by carol"],
        branch="feat/payments-schema",
    )
    created(
        alice,
        "T-0002",
        title="Implement POST /payments",
        depends_on=["T-0001"],
        files_hint=["api/payments.py"],
        acceptance=["idempotency covered by tests"],
    )
    _at(clock, "15:46:19")
    created(alice, "T-0003", title="Rollout plan", depends_on=["T-0001", "T-0002"])
    created(carol, "T-0004", title="Load-test sandbox")
    acted(bob, "T-0001", "claim", {"lease_seconds": 900})
    acted(bob, "T-0001", "renew", {"lease_seconds": 1800})
    acted(bob, "T-0001", "done")
    acted(carol, "T-0002", "claim", {"lease_seconds": YEAR})
    _at(clock, "15:46:20")
    updated(carol, "T-0002", title="Implement POST /payments (idempotent)")
    acted(bob, "T-0004", "claim", {"lease_seconds": YEAR})
    acted(alice, "T-0003", "block")

    ours = audits("backend")
    files = sorted(REFERENCE.glob("*.md"))
    assert len(ours) == len(files) == 11
    for message, path in zip(ours, files, strict=True):
        headers, body = _message_file(path)
        assert (message.sender, message.status, message.title, message.to) == (
            headers["from"],
            headers["status"],
            headers["title"],
            [],
        ), path.name
        # Transaction ids are random: take the reference's, then compare bytes.
        expected_id = re.search(r'"transaction_id": "([0-9a-f]{32})"', body)
        ours_body = message.body
        if expected_id:
            ours_body = re.sub(
                r'"transaction_id": "[0-9a-f]{32}"',
                f'"transaction_id": "{expected_id.group(1)}"',
                ours_body,
            )
        else:
            assert "transaction_id" not in ours_body
        # A lease operation's payload carries its fence (docs/tasks.md, "Fencing tokens"),
        # a key the reference's has not: the rest is its bytes.
        if headers["status"].startswith("lease."):
            assert re.search(r'\n  "fence": [1-9][0-9]*,', ours_body), path.name
        ours_body = re.sub(r'\n  "fence": [0-9]+,', "", ours_body)
        assert ours_body == body, path.name

    # The records' files, rendered by tasks_app.records as the folder sync will: the same
    # paths and the same bytes as the reference wrote.
    channel = channel_get("backend", viewer="alice")
    expected = {
        str(path.relative_to(REFERENCE)): path.read_text(encoding="utf-8")
        for path in sorted(REFERENCE.glob("tasks/*.json")) + sorted(REFERENCE.glob("claims/*.json"))
    }
    rendered = {}
    for task in selectors.task_list(channel=channel):
        record = selectors.task_record(task)
        rendered[records.task_path(record)] = records.record_text(record)
        lease = selectors.task_lease(task)
        if lease is not None:
            record = selectors.lease_record(lease)
            rendered[records.lease_path(record)] = records.record_text(record)
    assert len(expected) == 6
    assert rendered == expected
