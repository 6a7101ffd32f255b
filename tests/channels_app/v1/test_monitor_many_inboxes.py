"""Hostile run (issue 17, second round): the monitor's cursor was a vector of every inbox's
position, so past some 440 inboxes with deliveries (four agents' 256 sub-agents each, reached
with AgentChat-As and one direct message apiece) its own ``next_cursor`` was longer than
MONITOR_CURSOR_MAX and the monitor refused it: the admin could never read past that page. And a
page read each inbox by a query of its own.

Now the cursor is one number of the monitor's sequence: its size does not grow with the
inboxes, and a page is the same few queries however many inboxes there are."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.identity.services import agent_get_or_create
from channels_app.envelopes import MonitorCursor, monitor_cursor_decode
from channels_app.monitor import monitor_page
from channels_app.services import envelope_send
from channels_app.services.monitorseq import NUMBER_BATCH, monitor_number

pytestmark = pytest.mark.django_db

INBOXES = 520  # past the ~440 where the vector cursor stopped


def pages(limit):
    """Every page of the monitor from the start: (page, queries it took)."""
    cursor = None
    while True:
        with CaptureQueriesContext(connection) as queries:
            page = monitor_page(cursor=cursor, limit=limit)
        yield page, len(queries)
        if not page.items:
            return
        cursor = monitor_cursor_decode(page.next_cursor)


def test_a_cursor_the_monitor_makes_is_one_it_reads_whatever_the_number_of_inboxes():
    mallory = agent_get_or_create(name="mallory")
    names = [f"mallory.inbox-{i:03d}" for i in range(INBOXES)]
    for name in names:
        agent_get_or_create(name=name)
    sizes, counts, seen = set(), [], []
    few = [envelope_send(sender=mallory, to=name, text="hi") for name in names[:3]]
    monitor_number()  # as each sender does once its delivery commits (not in this test's)
    for page, queries in pages(limit=2):  # a few inboxes with deliveries
        sizes.add(len(page.next_cursor))
        counts.append(queries)
        seen += [item.inbox for item in page.items]
    assert seen == names[:3] and len(few) == 3
    for name in names[3:]:
        envelope_send(sender=mallory, to=name, text="hi")
    with CaptureQueriesContext(connection) as numbering:
        assert monitor_number() == INBOXES - 3
    # numbered a batch at a time, not a query per delivery
    batches = -(-(INBOXES - 3) // NUMBER_BATCH)
    assert len(numbering) <= 1 + 7 * batches, len(numbering)
    seen = []
    for page, queries in pages(limit=100):  # hundreds of them
        sizes.add(len(page.next_cursor))
        counts.append(queries)
        seen += [item.inbox for item in page.items]
        assert len(page.tails) == INBOXES + 1
    assert seen == names  # every inbox once, in the order they were delivered to
    # the cursor's size does not grow with the inboxes (only with the digits of the number)
    assert max(sizes) <= len(MonitorCursor(10**6).encode()) < 40
    assert monitor_cursor_decode(MonitorCursor(INBOXES).encode()) == MonitorCursor(INBOXES)
    # a page is the same few queries with 3 inboxes or 520 (no query per inbox)
    assert max(counts) <= 5, counts
