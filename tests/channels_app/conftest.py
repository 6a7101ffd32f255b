"""Fixtures of the live-delivery tests."""

from __future__ import annotations

import pytest

from channels_app import live
from tests.signals import until


class CountedReads:
    """Wraps the wait's database read: records who read, and signals each finished read."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        real = live.message_read

        def counting(**kwargs):
            try:
                return real(**kwargs)
            finally:
                self.names.append(kwargs["agent"].name)

        monkeypatch.setattr(live, "message_read", counting)

    async def parked(self, waits: int = 1) -> None:
        """The first read of ``waits`` waits has returned: each subscribed before it, so
        whatever is posted from now on reaches them by a ring (or a sweep, or a last look), not
        that read."""
        await until(lambda: len(self.names) >= waits, what="the waits' first reads")


@pytest.fixture
def counted_reads(monkeypatch: pytest.MonkeyPatch) -> CountedReads:
    return CountedReads(monkeypatch)
