"""The task and claim records as pure functions of unsaved instances: no database (no
``django_db`` mark, so a query would fail the test). The byte comparison with the reference's
own files is in test_audit (the replayed sample)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from tasks_app import records
from tasks_app.models import Lease, Task

AT = datetime(2026, 11, 29, 15, 46, 19, 999999, tzinfo=UTC)


def _task(**fields) -> Task:
    values = {
        "task_id": "T-1",
        "title": "Désign",
        "status": "in_progress",
        "owner": "bob",
        "created_by": "Alice Smith",
        "files_hint": ["db/schema.sql"],
        "acceptance": ["ok"],
        "branch": "",
        "updated_at": AT,
        "updated_at_spelling": Task.Spelling.SECONDS,
        **fields,
    }
    return Task(**values)


def _lease(**fields) -> Lease:
    values = {
        "owner": "bob",
        "lease_expires_at": AT + timedelta(seconds=300),
        "claimed_at": AT,
        "updated_at": AT,
        **fields,
    }
    return Lease(**values)


def test_task_record_has_the_reference_keys_in_its_order_and_its_nulls():
    record = records.task_record(_task(), channel="backend", depends_on=["A", "B"], lease=None)
    assert list(record) == list(records.TASK_FIELDS)
    assert record == {
        "id": "T-1",
        "channel": "backend",
        "title": "Désign",
        "status": "in_progress",
        "owner": "bob",
        "created_by": "Alice Smith",
        "depends_on": ["A", "B"],
        "files_hint": ["db/schema.sql"],
        "acceptance": ["ok"],
        "lease_expires_at": None,
        "branch": None,
        "updated_at": "2026-11-29T15:46:19+00:00",
    }
    assert (
        records.task_record(_task(owner=""), channel="c", depends_on=[], lease=None)["owner"]
        is None
    )


def test_updated_at_is_spelled_by_the_operation_that_wrote_it_and_never_rounded_up():
    seconds = _task(updated_at_spelling=Task.Spelling.SECONDS)
    micros = _task(updated_at_spelling=Task.Spelling.MICROSECONDS)
    assert records.task_updated_at(seconds) == "2026-11-29T15:46:19+00:00"
    assert records.task_updated_at(micros) == "2026-11-29T15:46:19.999999+00:00"


def test_times_in_another_offset_are_spelled_in_utc():
    paris = AT.astimezone(timezone(timedelta(hours=1)))
    assert records.task_updated_at(_task(updated_at=paris)) == "2026-11-29T15:46:19+00:00"
    assert records.lease_ts(paris) == "2026-11-29T15:46:19.999999+00:00"
    assert records.lease_ts(None) is None


def test_the_task_and_its_claim_spell_the_expiry_identically():
    lease = _lease()
    task_record = records.task_record(_task(), channel="backend", depends_on=[], lease=lease)
    claim = records.lease_record(lease, task_id="T-1", channel="backend")
    assert task_record["lease_expires_at"] == claim["lease_expires_at"]
    assert claim["lease_expires_at"] == "2026-11-29T15:51:19.999999+00:00"


def test_lease_record_has_the_reference_keys_in_its_order():
    claim = records.lease_record(
        _lease(
            previous_owner="carol",
            previous_lease_expires_at=AT - timedelta(seconds=1),
            recovery_reason="gone",
        ),
        task_id="T-1",
        channel="backend",
    )
    assert list(claim) == list(records.LEASE_FIELDS)
    assert claim == {
        "task_id": "T-1",
        "channel": "backend",
        "owner": "bob",
        "lease_expires_at": "2026-11-29T15:51:19.999999+00:00",
        "claimed_at": "2026-11-29T15:46:19.999999+00:00",
        "updated_at": "2026-11-29T15:46:19.999999+00:00",
        "previous_owner": "carol",
        "previous_lease_expires_at": "2026-11-29T15:46:18.999999+00:00",
        "recovery_reason": "gone",
    }
    fresh = records.lease_record(_lease(), task_id="T-1", channel="backend")
    assert [fresh[key] for key in records.LEASE_FIELDS[-3:]] == [None, None, None]


def test_paths_and_file_text_are_the_reference_ones():
    task = records.task_record(_task(), channel="backend", depends_on=[], lease=None)
    claim = records.lease_record(_lease(), task_id="T-1", channel="backend")
    assert records.task_path(task) == "tasks/T-1.json"
    assert records.lease_path(claim) == "claims/T-1.bob.json"
    text = records.record_text(task)
    assert text.startswith('{\n  "id": "T-1",\n  "channel": "backend",\n  "title": "Désign",')
    assert text.endswith('\n  "updated_at": "2026-11-29T15:46:19+00:00"\n}\n')
    assert '"files_hint": [\n    "db/schema.sql"\n  ],' in text
