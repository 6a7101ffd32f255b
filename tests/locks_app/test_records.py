"""The lock record and its spellings (locks_app.records), against the reference's own files."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from channels_app.models import Channel
from locks_app.models import PathLock, PathLockEntry
from locks_app.paths import entry_index_keys
from locks_app.records import (
    EVENT_FORCE_RELEASED,
    EVENT_LOCKED,
    EVENT_RECOVERED,
    lock_audit_payload,
    lock_file_bytes,
    lock_file_name,
    lock_to_dict,
)

pytestmark = pytest.mark.django_db

# backend/locks/226051ce4466421683b3708acb8b98f8.json of shared/fixtures/ref-root-sample.tar.gz,
# written by agent-chat-plugin 0.7.5: its exact bytes.
REFERENCE_LOCK_FILE = b"""{
  "channel": "backend",
  "expires_at": "2027-11-29T15:46:20.000000+00:00",
  "lock_id": "226051ce4466421683b3708acb8b98f8",
  "locked_at": "2026-11-29T15:46:20.000000+00:00",
  "owner": "carol",
  "paths": [
    {
      "display_path": "api/payments.py",
      "kind": "file",
      "normalized_path": "api/payments.py"
    }
  ],
  "previous_expires_at": null,
  "previous_owner": null,
  "recovery_reason": null,
  "updated_at": "2026-11-29T15:46:20.000000+00:00"
}
"""


def make_lock(*, channel="backend", paths=("api/payments.py",), **fields):
    defaults = {
        "lock_id": "226051ce4466421683b3708acb8b98f8",
        "owner": "carol",
        "expires_at": datetime(2027, 11, 29, 15, 46, 20, tzinfo=UTC),
        "locked_at": datetime(2026, 11, 29, 15, 46, 20, tzinfo=UTC),
        "updated_at": datetime(2026, 11, 29, 15, 46, 20, tzinfo=UTC),
    }
    lock = PathLock.objects.create(
        channel=Channel.objects.create(name=channel), **{**defaults, **fields}
    )
    for position, path in enumerate(paths):
        key, key_folded = entry_index_keys(lock.channel_id, path)
        PathLockEntry.objects.create(
            lock=lock,
            channel=lock.channel,
            position=position,
            normalized_path=path,
            display_path=path,
            index_key=key,
            index_key_folded=key_folded,
        )
    return PathLock.objects.select_related("channel").prefetch_related("entries").get(pk=lock.pk)


def test_the_lock_file_is_the_references_byte_for_byte():
    record = lock_to_dict(make_lock())
    assert lock_file_bytes(record) == REFERENCE_LOCK_FILE
    assert lock_file_name(record) == "locks/226051ce4466421683b3708acb8b98f8.json"


def test_non_ascii_is_written_as_is_and_precise_times_keep_their_microseconds():
    lock = make_lock(
        paths=("docs/été.md",),
        locked_at=datetime(2026, 11, 29, 15, 46, 20, 950000, tzinfo=UTC),
    )
    data = lock_file_bytes(lock_to_dict(lock))
    assert '"normalized_path": "docs/été.md"'.encode() in data
    assert b'"locked_at": "2026-11-29T15:46:20.950000+00:00"' in data
    assert data.endswith(b"}\n")


def test_audit_payloads_keep_the_references_keys_and_name_an_admin_actor():
    record = lock_to_dict(make_lock())
    locked = lock_audit_payload(EVENT_LOCKED, record, transaction_id="t", actor="carol")
    assert sorted(locked) == [
        "channel", "event", "expires_at", "lease_expires_at", "lock_id", "owner", "paths",
        "transaction_id", "updated_at",
    ]  # fmt: skip
    recovered = {**record, "owner": "bob", "recovery_reason": "gone"}
    by_owner = lock_audit_payload(
        EVENT_RECOVERED, recovered, transaction_id="t", previous=record, actor="bob"
    )
    assert "actor" not in by_owner
    by_admin = lock_audit_payload(
        EVENT_RECOVERED, recovered, transaction_id="t", previous=record, actor="root"
    )
    assert by_admin == {**by_owner, "actor": "root"}
    released = lock_audit_payload(
        EVENT_FORCE_RELEASED, record, transaction_id="t", actor="carol", reason="stuck"
    )
    assert released == {
        **locked,
        "event": EVENT_FORCE_RELEASED,
        "actor": "carol",  # named even when the admin's agent owned the lock
        "reason": "stuck",
    }
    json.dumps(released)
