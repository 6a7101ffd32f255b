"""A read or a wait examines at most READ_SCAN_ROWS messages a request (issue 17: a read for an
agent to whom nothing in the channel is addressed walked every row from its cursor, bounded by
the page limit of *relevant* rows, not by the rows examined). Counted as work (SQLite's virtual
machine steps, queries), not wall time: the work stays flat as 10,000 messages addressed to
others sit past the cursor, and no relevant message is ever passed."""

from __future__ import annotations

import asyncio
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentchat.core.models import Agent
from channels_app import services
from channels_app.live import message_wait
from channels_app.models import Channel, Message
from channels_app.selectors import READ_SCAN_ROWS, cursor_get
from channels_app.services import cursors
from tests.pages import vm_steps

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def ops(make_agent) -> Channel:
    for name in ("alice", "bob", "carol"):
        make_agent(name)
    return services.channel_create(name="ops", created_by="alice")


def to_others(channel: Channel, count: int) -> None:
    """``count`` messages from bob to carol: none is relevant to alice."""
    services.message_post(channel=channel, sender="bob", title="for carol", to="carol")
    template = Message.objects.filter(channel=channel).order_by("-seq").first()
    assert template is not None
    channel.refresh_from_db()
    first = channel.last_seq + 1
    rows = []
    for seq in range(first, first + count - 1):
        template.pk, template.seq = f"bulk-{channel.pk}-{seq}", seq
        rows.append(
            Message(**{f.attname: getattr(template, f.attname) for f in Message._meta.fields})
        )
    Message.objects.bulk_create(rows, batch_size=500)
    Channel.objects.filter(pk=channel.pk).update(last_seq=first + count - 2)
    channel.refresh_from_db()


def alice_reads(channel: Channel):
    alice = Agent.objects.get(name="alice")
    with vm_steps() as steps, CaptureQueriesContext(connection) as queries:
        page = services.message_read(channel=channel, agent=alice)
    return page, steps[0], len(queries)


def test_a_read_past_messages_to_others_examines_at_most_the_budget(ops):
    to_others(ops, READ_SCAN_ROWS + 10)
    services.cursor_ack(channel=ops, agent=Agent.objects.get(name="alice"), seq=0)
    _, few, few_queries = alice_reads(ops)
    services.cursor_ack(channel=ops, agent=Agent.objects.get(name="alice"), seq=0)
    to_others(ops, 10_000)
    page, many, many_queries = alice_reads(ops)
    # flat: the same budget of rows examined, whatever lies beyond it
    assert many <= few * 1.2 + 2, (few, many)
    assert many_queries == few_queries
    # what was examined is passed (nothing in it is alice's), and more says read again
    assert (page.parts, page.cursor, page.more) == ([], READ_SCAN_ROWS, True)


def test_reads_go_on_where_the_budget_stopped_and_never_pass_a_relevant_message(ops):
    to_others(ops, READ_SCAN_ROWS * 2 + 5)
    services.message_post(channel=ops, sender="bob", title="for alice", to="alice")
    to_others(ops, 3)
    ops.refresh_from_db()
    mine = ops.last_seq - 3
    seen, reads = [], 0
    while True:
        page, _, _ = alice_reads(ops)
        reads += 1
        seen += [json.loads(part)["seq"] for part in page.parts]
        if not page.more:
            break
    assert seen == [mine]
    assert reads == 3  # two budgets of rows, then the rest with alice's message
    assert page.cursor == ops.last_seq


def test_a_wait_goes_through_the_budget_in_reads_of_their_own(ops, monkeypatch):
    # A wait does not move the cursor on nothing relevant; it reads a budget of rows at a
    # time, each read on its own, and finds alice's message past them.
    to_others(ops, READ_SCAN_ROWS * 3)
    services.message_post(channel=ops, sender="bob", title="for alice", to="alice")
    ops.refresh_from_db()
    alice = Agent.objects.get(name="alice")
    examined = []
    real_page = cursors.message_page
    real_exist = cursors.messages_relevant_exist

    def page(**kwargs):
        examined.append(kwargs["upto"] - kwargs["after"])
        return real_page(**kwargs)

    def exist(**kwargs):
        examined.append(kwargs["upto"] - kwargs["after"])
        return real_exist(**kwargs)

    monkeypatch.setattr(cursors, "message_page", page)
    monkeypatch.setattr(cursors, "messages_relevant_exist", exist)
    result = asyncio.run(
        message_wait(channel=ops, agent=alice, timeout=5, limit=100, max_bytes=None)
    )
    assert [json.loads(p)["seq"] for p in result.page.parts] == [ops.last_seq]
    assert max(examined) <= READ_SCAN_ROWS
    # nothing examined twice: three budgets, then the last message
    assert sum(examined) <= READ_SCAN_ROWS * 3 + 1 + READ_SCAN_ROWS, examined
    assert cursor_get(agent=alice, channel=ops) == ops.last_seq
