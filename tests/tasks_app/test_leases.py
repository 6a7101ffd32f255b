"""Leases: claim, renew, done, release, block, recover; ownership, expiry and check order.

Time is moved with the ``clock`` fixture, never slept."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agentchat.core.rules.errors import AppError
from channels_app.selectors import channel_get
from tasks_app import selectors, services
from tasks_app.models import Lease, LeaseHistory
from tasks_app.services.validation import reason_check
from tests.tasks_app.helpers import (
    act,
    act_raw,
    acted,
    audit_payloads,
    audits,
    created,
    error,
    show,
    unchanged,
    update,
    updated,
)

pytestmark = pytest.mark.django_db

# A quarter past the second: lease times keep it (expiry from the precise clock).
T0 = datetime(2026, 11, 29, 15, 46, 19, 250000, tzinfo=UTC)


@pytest.fixture
def at_t0(clock):
    clock.current = T0
    return clock


@pytest.fixture
def leased(alice, bob, backend, at_t0):
    """Task T leased by bob for 100 s from 15:46:19."""
    created(alice, "T")
    acted(bob, "T", "claim", {"lease_seconds": 100})
    return "T"


# --- claim ---------------------------------------------------------------------------------------


def test_claim_moves_a_ready_task_to_in_progress_with_owner_expiry_and_lease(
    alice, bob, backend, at_t0
):
    created(alice, "T")
    body = acted(bob, "T", "claim", {"lease_seconds": 600})
    assert body["status"] == "in_progress"
    assert body["owner"] == "bob"
    assert body["lease_expires_at"] == "2026-11-29T15:56:19.250000+00:00"
    assert body["updated_at"] == "2026-11-29T15:46:19.250000+00:00"
    assert body["lease"] == {
        "task_id": "T",
        "channel": "backend",
        "owner": "bob",
        "lease_expires_at": "2026-11-29T15:56:19.250000+00:00",
        "claimed_at": "2026-11-29T15:46:19.250000+00:00",
        "updated_at": "2026-11-29T15:46:19.250000+00:00",
        "previous_owner": None,
        "previous_lease_expires_at": None,
        "recovery_reason": None,
    }
    assert show(alice, "T") == body
    payload = audit_payloads()[-1]
    transaction_id = payload.pop("transaction_id")
    assert len(transaction_id) == 32 and int(transaction_id, 16) >= 0
    assert payload == {
        "changed_fields": ["lease_expires_at", "owner", "status", "updated_at"],
        "channel": "backend",
        "event": "lease.claimed",
        "fence": 1,
        "lease_expires_at": "2026-11-29T15:56:19.250000+00:00",
        "lease_owner": "bob",
        "owner": "bob",
        "previous_status": "open",
        "status": "in_progress",
        "task_id": "T",
        "updated_at": "2026-11-29T15:46:19.250000+00:00",
    }
    message = audits()[-1]
    assert (message.sender, message.title, message.status, message.to) == (
        "bob",
        "lease.claimed T",
        "lease.claimed",
        [],
    )


def test_claim_defaults_to_300_seconds_and_accepts_fractions(alice, bob, backend, at_t0):
    created(alice, "A")
    created(alice, "B")
    assert acted(bob, "A", "claim")["lease_expires_at"] == "2026-11-29T15:51:19.250000+00:00"
    body = acted(bob, "B", "claim", {"lease_seconds": 0.5})
    assert body["lease_expires_at"] == "2026-11-29T15:46:19.750000+00:00"


def test_claim_of_a_blocked_task_and_of_an_own_assignment_succeeds(alice, bob, backend):
    created(alice, "T", owner="bob")
    updated(alice, "T", status="blocked")
    body = acted(bob, "T", "claim")
    assert (body["status"], body["owner"]) == ("in_progress", "bob")
    assert audit_payloads()[-1]["previous_status"] == "blocked"


def test_claim_of_a_leased_task_fails_with_lease_conflict(alice, bob, carol, leased):
    for client in (carol, bob):  # the owner too: there is nothing to claim
        with unchanged():
            err = error(act(client, "T", "claim"), 409, "LEASE_CONFLICT")
        assert err["message"] == "task T is leased by bob"
        assert err["detail"] == {
            "task_id": "T",
            "owner": "bob",
            "lease_expires_at": "2026-11-29T15:47:59.250000+00:00",
        }


def test_claim_of_a_task_assigned_to_someone_else_fails_with_lease_conflict(alice, bob, backend):
    created(alice, "T", owner="carol")
    with unchanged():
        err = error(act(bob, "T", "claim"), 409, "LEASE_CONFLICT")
    assert err["message"] == "task T is assigned to carol"


@pytest.mark.parametrize("who", ["carol", "bob"])
def test_claim_of_an_expired_lease_fails_with_recovery_required(api_for, leased, clock, who):
    clock.advance(100)
    with unchanged():
        err = error(act(api_for(who), "T", "claim"), 409, "LEASE_RECOVERY_REQUIRED")
    assert err["message"] == "expired lease for task T requires explicit recovery"
    assert err["detail"] == {
        "task_id": "T",
        "previous_owner": "bob",
        "previous_lease_expires_at": "2026-11-29T15:47:59.250000+00:00",
    }


def test_a_lease_is_expired_exactly_at_its_expiry(bob, carol, leased, clock):
    clock.advance(99)
    error(act(carol, "T", "recover", {"reason": "gone"}), 409, "LEASE_NOT_EXPIRED")
    assert acted(bob, "T", "renew", {"lease_seconds": 1})["lease_expires_at"] == (
        "2026-11-29T15:47:59.250000+00:00"
    )
    clock.advance(1)  # now == lease_expires_at
    error(act(bob, "T", "renew"), 409, "LEASE_RECOVERY_REQUIRED")


def test_a_one_second_lease_taken_late_in_a_second_lasts_one_second(
    alice, bob, carol, backend, clock
):
    # Issue 8 item 11: "now" cut to the second made this lease expire 0.05 s after the claim.
    created(alice, "T")
    clock.current = datetime(2026, 11, 29, 15, 46, 19, 950000, tzinfo=UTC)
    body = acted(bob, "T", "claim", {"lease_seconds": 1})
    assert body["lease_expires_at"] == "2026-11-29T15:46:20.950000+00:00"
    assert body["lease"]["claimed_at"] == "2026-11-29T15:46:19.950000+00:00"
    clock.advance(0.1)  # 15:46:20.05, the next second
    error(act(carol, "T", "recover", {"reason": "gone"}), 409, "LEASE_NOT_EXPIRED")
    clock.advance(0.899999)  # one microsecond before the expiry
    assert acted(bob, "T", "renew", {"lease_seconds": 1})["lease_expires_at"] == (
        "2026-11-29T15:46:21.949999+00:00"
    )
    clock.advance(1)  # exactly at the new expiry
    error(act(bob, "T", "renew"), 409, "LEASE_RECOVERY_REQUIRED")


def test_claim_of_a_done_or_cancelled_task_fails_with_invalid_transition(alice, bob, backend):
    created(alice, "T")
    updated(alice, "T", status="cancelled")
    with unchanged():
        err = error(act(bob, "T", "claim"), 409, "TASK_INVALID_TRANSITION")
    assert err["message"] == "transition 'cancelled' -> 'in_progress' is not allowed"


# --- check order: state before duration ------------------------------------------------------


def test_claim_with_zero_on_a_leased_task_reports_the_conflict_first(carol, leased):
    with unchanged():
        error(act(carol, "T", "claim", {"lease_seconds": 0}), 409, "LEASE_CONFLICT")


def test_claim_with_zero_on_an_assigned_task_reports_the_conflict_first(alice, bob, backend):
    created(alice, "T", owner="carol")
    error(act(bob, "T", "claim", {"lease_seconds": 0}), 409, "LEASE_CONFLICT")


def test_claim_checks_the_duration_before_transition_and_readiness(alice, bob, backend):
    created(alice, "A")
    created(alice, "T", depends_on=["A"])
    created(alice, "C")
    updated(alice, "C", status="cancelled")
    error(act(bob, "T", "claim", {"lease_seconds": 0}), 400, "LEASE_INVALID_DURATION")
    error(act(bob, "C", "claim", {"lease_seconds": -1}), 400, "LEASE_INVALID_DURATION")


def test_renew_checks_owner_then_expiry_then_duration(bob, carol, leased, clock):
    error(act(carol, "T", "renew", {"lease_seconds": 0}), 403, "LEASE_OWNER_MISMATCH")
    error(act(bob, "T", "renew", {"lease_seconds": 0}), 400, "LEASE_INVALID_DURATION")
    clock.advance(100)
    error(act(carol, "T", "renew"), 403, "LEASE_OWNER_MISMATCH")
    error(act(bob, "T", "renew", {"lease_seconds": 0}), 409, "LEASE_RECOVERY_REQUIRED")


def test_recover_checks_the_reason_first(alice, carol, leased, clock):
    created(alice, "U")
    with unchanged():
        error(act(carol, "T", "recover"), 400, "LEASE_INVALID_REASON")  # unexpired
        error(act(carol, "U", "recover", {"lease_seconds": 0}), 400, "LEASE_INVALID_REASON")
        error(act(carol, "nope", "recover"), 400, "LEASE_INVALID_REASON")
        error(act(carol, "U", "recover", {"reason": "r"}), 404, "LEASE_NOT_FOUND")
        error(
            act(carol, "T", "recover", {"reason": "r", "lease_seconds": 0}),
            409,
            "LEASE_NOT_EXPIRED",
        )
        clock.advance(100)
        error(
            act(carol, "T", "recover", {"reason": "r", "lease_seconds": 0}),
            400,
            "LEASE_INVALID_DURATION",
        )


# --- durations -------------------------------------------------------------------------------

BAD_DURATIONS = [
    "0",
    "-1",
    "-0.5",
    "NaN",
    "Infinity",
    "-Infinity",
    "1e12",
    "1e308",
    "1" + "0" * 400,
    '"300"',
    '"abc"',
    "true",
    "false",
    "null",
    "[300]",
    '{"s": 1}',
]


@pytest.mark.parametrize("raw", BAD_DURATIONS)
@pytest.mark.parametrize("action", ["claim", "renew", "recover"])
def test_bad_durations_fail_with_lease_invalid_duration(alice, bob, backend, clock, raw, action):
    created(alice, "T")
    if action != "claim":
        acted(bob, "T", "claim", {"lease_seconds": 10})
    if action == "recover":
        clock.advance(10)
        body = f'{{"reason": "stale", "lease_seconds": {raw}}}'
    else:
        body = f'{{"lease_seconds": {raw}}}'
    with unchanged():
        err = error(act_raw(bob, "T", action, body), 400, "LEASE_INVALID_DURATION")
    assert (err["detail"]["field"], err["detail"]["max"]) == ("lease_seconds", 86400)


def test_duration_messages(alice, bob, backend):
    created(alice, "T")

    def message(raw: str) -> str:
        response = act_raw(bob, "T", "claim", f'{{"lease_seconds": {raw}}}')
        return error(response, 400, "LEASE_INVALID_DURATION")["message"]

    assert message("0") == "lease_seconds must be positive"
    assert message('"300"') == "lease_seconds must be a number of seconds"
    assert message("1e12") == "lease_seconds must be at most 86400 seconds"


@pytest.mark.parametrize("action", ["claim", "renew", "recover"])
def test_a_lease_over_the_maximum_fails_with_invalid_duration(
    alice, bob, backend, clock, settings, action
):
    # Issue 8 item 11: a lease nobody can ever recover (2.5e11 s was granted) is refused.
    settings.AGENTCHAT_MAX_LEASE_SECONDS = 3600
    created(alice, "T")
    if action != "claim":
        acted(bob, "T", "claim", {"lease_seconds": 10})
    if action == "recover":
        clock.advance(10)
    body = {"reason": "stale"} if action == "recover" else {}
    with unchanged():
        err = error(
            act(bob, "T", action, {**body, "lease_seconds": 3600.001}),
            400,
            "LEASE_INVALID_DURATION",
        )
    assert err["detail"] == {"field": "lease_seconds", "value": 3600.001, "min": 0.001, "max": 3600}
    assert acted(bob, "T", action, {**body, "lease_seconds": 3600})["status"] == "in_progress"


def test_the_maximum_lease_defaults_to_a_day(alice, bob, backend, at_t0):
    created(alice, "A")
    created(alice, "B")
    error(act(bob, "A", "claim", {"lease_seconds": 86400.5}), 400, "LEASE_INVALID_DURATION")
    body = acted(bob, "A", "claim", {"lease_seconds": 86400})
    assert body["lease_expires_at"] == "2026-11-30T15:46:19.250000+00:00"
    error(act(bob, "B", "claim", {"lease_seconds": 1e-9}), 400, "LEASE_INVALID_DURATION")
    assert acted(bob, "B", "claim", {"lease_seconds": 0.001})["status"] == "in_progress"


def test_a_maximum_beyond_the_calendar_still_answers_a_clean_400(alice, bob, backend, settings):
    settings.AGENTCHAT_MAX_LEASE_SECONDS = 1e15
    created(alice, "A")
    created(alice, "B")
    with unchanged():
        err = error(act(bob, "A", "claim", {"lease_seconds": 1e12}), 400, "LEASE_INVALID_DURATION")
    assert err["message"] == "lease_seconds is outside the supported timestamp range"
    assert acted(bob, "B", "claim", {"lease_seconds": 10**10})["status"] == "in_progress"


def test_lease_actions_refuse_unknown_fields(alice, bob, backend):
    created(alice, "T")
    with unchanged():
        error(act(bob, "T", "claim", {"ttl": 5}), 400, "LEASE_UNKNOWN_FIELD")
        error(act(bob, "T", "done", {"force": True}), 400, "LEASE_UNKNOWN_FIELD")
        error(act(bob, "T", "recover", {"reason": "r", "owner": "bob"}), 400, "LEASE_UNKNOWN_FIELD")
        error(act(bob, "T", "block", {"status": "x"}), 400, "TASK_UNKNOWN_FIELD")


# --- renew -------------------------------------------------------------------------------------


def test_renew_extends_the_owners_lease_and_keeps_claimed_at(bob, leased, clock):
    clock.advance(30)
    body = acted(bob, "T", "renew", {"lease_seconds": 1800})
    assert body["lease_expires_at"] == "2026-11-29T16:16:49.250000+00:00"
    assert body["lease"]["claimed_at"] == "2026-11-29T15:46:19.250000+00:00"
    assert body["lease"]["updated_at"] == "2026-11-29T15:46:49.250000+00:00"
    payload = audit_payloads()[-1]
    del payload["transaction_id"]
    assert payload == {
        "changed_fields": ["lease_expires_at", "updated_at"],
        "channel": "backend",
        "event": "lease.renewed",
        "fence": 1,
        "lease_expires_at": "2026-11-29T16:16:49.250000+00:00",
        "lease_owner": "bob",
        "owner": "bob",
        "previous_status": "in_progress",
        "status": "in_progress",
        "task_id": "T",
        "updated_at": "2026-11-29T15:46:49.250000+00:00",
    }


@pytest.mark.parametrize("action", ["renew", "done", "release"])
def test_renew_done_release_by_a_non_owner_fail_with_owner_mismatch(carol, leased, action):
    with unchanged():
        err = error(act(carol, "T", action), 403, "LEASE_OWNER_MISMATCH")
    assert err["message"] == "lease for task T belongs to bob"
    assert err["detail"] == {"task_id": "T", "owner": "carol", "current_owner": "bob"}


@pytest.mark.parametrize("action", ["renew", "done", "release"])
def test_renew_done_release_of_an_expired_lease_fail_with_recovery_required(
    bob, carol, leased, clock, action
):
    clock.advance(100)
    with unchanged():
        error(act(carol, "T", action), 403, "LEASE_OWNER_MISMATCH")  # owner first
        error(act(bob, "T", action), 409, "LEASE_RECOVERY_REQUIRED")


def test_renew_without_a_lease_fails_with_lease_not_found(alice, bob, backend):
    created(alice, "T")
    with unchanged():
        err = error(act(bob, "T", "renew"), 404, "LEASE_NOT_FOUND")
    assert err["message"] == "no active lease for task T"


@pytest.mark.parametrize("action", ["claim", "renew", "done", "block", "release", "recover"])
def test_actions_on_an_unknown_task_fail_with_task_not_found(alice, backend, action):
    body = {"reason": "r"} if action == "recover" else {}
    with unchanged():
        error(act(alice, "nope", action, body), 404, "TASK_NOT_FOUND")
        error(act(alice, "bad%20id", action, body), 400, "TASK_INVALID_ID")


# --- done / release --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("action", "status", "event"),
    [
        ("done", "done", "lease.completed"),
        ("release", "open", "lease.released"),
    ],
)
def test_done_and_release_clear_the_lease(alice, bob, leased, clock, action, status, event):
    clock.advance(5)
    body = acted(bob, "T", action)
    assert (body["status"], body["owner"], body["lease_expires_at"], body["lease"]) == (
        status,
        None,
        None,
        None,
    )
    assert body["updated_at"] == "2026-11-29T15:46:24.250000+00:00"
    assert not Lease.objects.exists()
    payload = audit_payloads()[-1]
    del payload["transaction_id"]
    assert payload == {
        "changed_fields": ["lease_expires_at", "owner", "status", "updated_at"],
        "channel": "backend",
        "event": event,
        "fence": 1,
        "lease_expires_at": None,
        "lease_owner": "bob",
        "owner": None,
        "previous_lease_expires_at": "2026-11-29T15:47:59.250000+00:00",
        "previous_status": "in_progress",
        "status": status,
        "task_id": "T",
        "updated_at": "2026-11-29T15:46:24.250000+00:00",
    }


@pytest.mark.parametrize(("action", "fallback"), [("done", "complete"), ("release", "release")])
def test_done_and_release_without_a_lease_are_plain_transitions_keeping_the_owner(
    alice, backend, at_t0, action, fallback
):
    created(alice, "T", owner="carol")
    updated(alice, "T", status="in_progress")
    body = acted(alice, "T", action)
    assert (body["status"], body["owner"]) == (
        "done" if action == "done" else "open",
        "carol",
    )
    payload = audit_payloads()[-1]
    assert len(payload.pop("transaction_id")) == 32
    assert payload == {
        "changed_fields": ["status", "updated_at"],
        "channel": "backend",
        "event": "task.updated",
        "fence": 0,
        "lease_expires_at": None,
        "lease_fallback": fallback,
        "owner": "carol",
        "previous_status": "in_progress",
        "status": body["status"],
        "task_id": "T",
        "updated_at": "2026-11-29T15:46:19.250000+00:00",
    }
    assert audits()[-1].sender == "alice"


def test_done_twice_is_idempotent(alice, bob, leased):
    acted(bob, "T", "done")
    body = acted(bob, "T", "done")
    assert body["status"] == "done"
    assert audit_payloads()[-1]["lease_fallback"] == "complete"


# --- block and generic updates on a leased task -------------------------------------------------


def test_block_of_a_leased_task_always_fails(bob, carol, leased, clock):
    with unchanged():
        err = error(act(bob, "T", "block"), 409, "LEASE_MUTATION_REQUIRED")
        assert err["message"] == "task T must be changed through its lease operation"
        assert err["detail"] == {"task_id": "T", "protected_fields": ["status"]}
        error(act(carol, "T", "block"), 403, "LEASE_OWNER_MISMATCH")
        clock.advance(100)
        error(act(bob, "T", "block"), 409, "LEASE_RECOVERY_REQUIRED")
        error(act(carol, "T", "block"), 409, "LEASE_RECOVERY_REQUIRED")


def test_generic_update_on_a_leased_task_checks_expiry_then_owner_then_fields(
    bob, carol, leased, clock
):
    with unchanged():
        error(update(carol, "T", title="hijack"), 403, "LEASE_OWNER_MISMATCH")
        error(update(carol, "T", owner="carol"), 403, "LEASE_OWNER_MISMATCH")
        for body, fields in [
            ({"owner": "bob"}, ["owner"]),  # even the same value
            ({"clear_owner": True}, ["owner"]),
            ({"status": "blocked"}, ["status"]),
            ({"status": "open", "owner": "carol", "title": "x"}, ["owner", "status"]),
        ]:
            err = error(update(bob, "T", **body), 409, "LEASE_MUTATION_REQUIRED")
            assert err["detail"]["protected_fields"] == fields
    # The owner may edit the rest, and write the same status.
    body = updated(bob, "T", title="renamed", status="in_progress", branch="b")
    assert (body["title"], body["lease"]["owner"]) == ("renamed", "bob")
    clock.advance(100)
    with unchanged():
        error(update(bob, "T", title="late"), 409, "LEASE_RECOVERY_REQUIRED")
        error(update(carol, "T", title="late"), 409, "LEASE_RECOVERY_REQUIRED")


def test_generic_update_keeps_the_lease_and_spells_updated_at_in_seconds(bob, leased, clock):
    clock.advance(1)
    body = updated(bob, "T", title="Implement (idempotent)")
    assert body["updated_at"] == "2026-11-29T15:46:20+00:00"
    assert body["lease_expires_at"] == body["lease"]["lease_expires_at"]
    assert audit_payloads()[-1]["changed_fields"] == ["title", "updated_at"]


# --- recover -----------------------------------------------------------------------------------


def test_recover_of_an_unexpired_lease_fails_with_not_expired(carol, leased):
    with unchanged():
        err = error(act(carol, "T", "recover", {"reason": "gone"}), 409, "LEASE_NOT_EXPIRED")
    assert err["message"] == "lease for task T is still active"
    assert err["detail"] == {
        "task_id": "T",
        "owner": "bob",
        "lease_expires_at": "2026-11-29T15:47:59.250000+00:00",
    }


@pytest.mark.parametrize(
    "raw",
    [
        "{}",
        '{"reason": ""}',
        '{"reason": "  "}',
        '{"reason": null}',
        '{"reason": 5}',
        '{"reason": "a\\nb"}',
    ],
)
def test_recover_without_a_reason_fails_with_invalid_reason(carol, leased, clock, raw):
    clock.advance(100)
    with unchanged():
        error(act_raw(carol, "T", "recover", raw), 400, "LEASE_INVALID_REASON")


def test_recover_with_a_nul_in_the_reason_is_refused_by_the_json_layer(carol, leased, clock):
    clock.advance(100)
    with unchanged():
        error(act_raw(carol, "T", "recover", '{"reason": "a\\u0000"}'), 400, "INVALID_TEXT")


def test_recover_of_an_expired_lease_gives_the_caller_a_fresh_lease(alice, carol, leased, clock):
    clock.advance(160)  # 15:48:59
    body = acted(carol, "T", "recover", {"reason": "bob vanished", "lease_seconds": 600})
    assert (body["status"], body["owner"]) == ("in_progress", "carol")
    assert body["lease"] == {
        "task_id": "T",
        "channel": "backend",
        "owner": "carol",
        "lease_expires_at": "2026-11-29T15:58:59.250000+00:00",
        "claimed_at": "2026-11-29T15:48:59.250000+00:00",
        "updated_at": "2026-11-29T15:48:59.250000+00:00",
        "previous_owner": "bob",
        "previous_lease_expires_at": "2026-11-29T15:47:59.250000+00:00",
        "recovery_reason": "bob vanished",
    }
    payload = audit_payloads()[-1]
    del payload["transaction_id"]
    assert payload == {
        "changed_fields": ["lease_expires_at", "owner", "updated_at"],
        "channel": "backend",
        "event": "lease.recovered",
        "fence": 2,
        "lease_expires_at": "2026-11-29T15:58:59.250000+00:00",
        "lease_owner": "carol",
        "owner": "carol",
        "previous_lease_expires_at": "2026-11-29T15:47:59.250000+00:00",
        "previous_owner": "bob",
        "previous_status": "in_progress",
        "recovery_reason": "bob vanished",
        "status": "in_progress",
        "task_id": "T",
        "updated_at": "2026-11-29T15:48:59.250000+00:00",
    }
    assert audits()[-1].sender == "carol"
    # The new owner now holds an ordinary lease.
    assert acted(carol, "T", "done")["status"] == "done"


def test_the_previous_owner_may_recover_its_own_expired_lease(bob, leased, clock):
    clock.advance(100)
    body = acted(bob, "T", "recover", {"reason": "I am back"})
    assert body["lease"]["previous_owner"] == "bob"
    assert body["owner"] == "bob"


def test_recover_without_a_lease_fails_with_lease_not_found(alice, carol, backend):
    created(alice, "T")
    with unchanged():
        error(act(carol, "T", "recover", {"reason": "r"}), 404, "LEASE_NOT_FOUND")


def test_lease_history_is_kept(alice, bob, carol, leased, clock):
    acted(bob, "T", "renew", {"lease_seconds": 10})
    clock.advance(10)
    acted(carol, "T", "recover", {"reason": "stale"})
    acted(carol, "T", "release")
    rows = list(
        LeaseHistory.objects.order_by("pk").values_list(
            "event", "actor", "owner", "previous_owner", "recovery_reason"
        )
    )
    assert rows == [
        ("lease.claimed", "bob", "bob", "", ""),
        ("lease.renewed", "bob", "bob", "", ""),
        ("lease.recovered", "carol", "carol", "bob", "stale"),
        ("lease.released", "carol", "carol", "", ""),
    ]
    transaction_ids = [json.loads(m.body)["transaction_id"] for m in audits()[1:]]
    assert list(LeaseHistory.objects.order_by("pk").values_list("transaction_id", flat=True)) == (
        transaction_ids
    )


# --- force release (the admin's break-glass, called by the admin action) ------------------------


def force_release(task_id="T", reason="stuck", actor="admin"):
    # As the admin action calls it: the reason parsed first, then the service.
    return services.lease_force_release(
        channel=channel_get("backend", viewer="alice"),
        task_id=task_id,
        actor=actor,
        reason=reason_check(reason),
    )


def test_force_release_of_an_unexpired_lease_reopens_the_task(bob, carol, leased, clock):
    clock.advance(5)
    task = force_release()
    record = selectors.task_record(task)
    assert (record["status"], record["owner"], record["lease_expires_at"]) == ("open", None, None)
    assert record["updated_at"] == "2026-11-29T15:46:24.250000+00:00"
    assert not Lease.objects.exists()
    assert audits()[-1].sender == "admin"
    # The former owner's lease actions now find nothing to act on.
    error(act(bob, "T", "renew"), 404, "LEASE_NOT_FOUND")
    assert acted(carol, "T", "claim")["owner"] == "carol"


def test_force_release_checks_the_reason_first_then_task_then_lease(alice, leased):
    created(alice, "U")
    with unchanged():
        for reason in ("", "  ", None, 5, "a\nb", "a\r", "a\x00"):
            with pytest.raises(AppError) as caught:
                force_release(task_id="nope", reason=reason)
            assert caught.value.code == "LEASE_INVALID_REASON"
        with pytest.raises(AppError) as caught:
            force_release(task_id="nope")
        assert caught.value.code == "TASK_NOT_FOUND"
        with pytest.raises(AppError) as caught:
            force_release(task_id="U")
        assert caught.value.code == "LEASE_NOT_FOUND"
