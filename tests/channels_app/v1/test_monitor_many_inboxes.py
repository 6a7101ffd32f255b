"""Hostile run (issue 17, second round): the monitor's cursor is a vector of every inbox's
position, so past some 440 inboxes with deliveries (four agents' 256 sub-agents each, reached
with AgentChat-As and one direct message apiece) its own ``next_cursor`` is longer than
MONITOR_CURSOR_MAX and the monitor refuses it: the admin can never read past that page.

Strict xfail until the cursor is bounded whatever the number of inboxes: the fix removes the
mark (the test then passes, or strict xfail fails the run)."""

from __future__ import annotations

import pytest

from channels_app.envelopes import MonitorCursor, monitor_cursor_decode


@pytest.mark.xfail(
    strict=True,
    reason="issue 17 hostile finding: the monitor refuses its own cursor past ~440 inboxes",
)
def test_a_cursor_the_monitor_makes_is_one_it_reads_whatever_the_number_of_inboxes():
    positions = {f"mallory.inbox-{i:03d}": 1 for i in range(256)}
    positions |= {f"carol.inbox-{i:03d}": 1 for i in range(256)}
    made = MonitorCursor(positions).encode()
    assert monitor_cursor_decode(made).positions == positions
