"""A still clock and counted uuids, so a scenario gives the same records on every run (golden
files): ``frozen`` stands in for ``django.utils.timezone.now`` (message times, channel and
cursor times) and ``agentchat.core.rules.clock.now`` (task, lease and lock times) and moves only
when the test advances it; ``uuid.uuid4`` counts (lock ids, transaction ids, message ids)."""

from __future__ import annotations

import itertools
import uuid
from datetime import UTC, datetime

import pytest

from tests.conftest import FakeClock

START = datetime(2030, 1, 2, 3, 4, 5, 250000, tzinfo=UTC)


@pytest.fixture
def frozen(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    from django.utils import timezone

    from agentchat.core.rules import clock as clock_module

    fake = FakeClock()
    fake.current = START
    monkeypatch.setattr(timezone, "now", fake)
    monkeypatch.setattr(clock_module, "now", fake)
    counter = itertools.count(1)
    monkeypatch.setattr(uuid, "uuid4", lambda: uuid.UUID(int=next(counter)))
    return fake
