"""A search costs the matches it finds, never the history: a word that matches nothing reads
no message at all, whatever the channels hold (the hostile run: ~480 ms on PostgreSQL, whose
planner, without statistics on a table just filled, scanned every message and computed
``to_tsvector`` of each title and body). Counted, not timed: on PostgreSQL the rows this
transaction read from the messages' table (``pg_stat_xact_user_tables``, per scan kind), on
SQLite the virtual machine's steps (a progress handler)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.utils import timezone

from channels_app.models import Channel, Message
from channels_app.records import message_json_size
from channels_app.search import messages_search
from channels_app.services import channel_create

HISTORY = 400


def _fill(channel: Channel, count: int, start: int = 0) -> None:
    now = timezone.now()
    rows = []
    for seq in range(start + 1, start + count + 1):
        row = Message(
            id=f"msg_{channel.pk}_{seq:06d}",
            channel=channel,
            seq=seq,
            sender="alice",
            to=[],
            recipients="",
            ts=now,
            title=f"fill {seq}",
            body=f"filler message {seq} about the plan " + "words " * 40,
        )
        row.json_size = message_json_size(row)
        rows.append(row)
    Message.objects.bulk_create(rows)
    Channel.objects.filter(pk=channel.pk).update(last_seq=start + count)


@pytest.fixture
def history(make_agent):
    make_agent("alice")
    channel = channel_create(name="big", created_by="alice")
    _fill(channel, HISTORY)
    return channel


def _rows_read() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) "
            "FROM pg_stat_xact_user_tables WHERE relname = %s",
            [Message._meta.db_table],
        )
        row = cursor.fetchone()
    return int(row[0]) if row else 0


def _work(search) -> int:
    """The search's work: rows read from the messages (PostgreSQL) or VM steps (SQLite)."""
    if connection.vendor == "postgresql":
        before = _rows_read()
        search()
        return _rows_read() - before
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    connection.ensure_connection()
    connection.connection.set_progress_handler(step, 100)
    try:
        search()
    finally:
        connection.connection.set_progress_handler(None, 0)
    return steps[0]


@pytest.mark.parametrize("channel_only", [False, True])
def test_a_word_that_matches_nothing_reads_no_message(history, channel_only):
    channel = history if channel_only else None

    def search():
        found, more = messages_search(viewer="alice", query="zzzqqq", channel=channel)
        assert (found, more) == ([], False)

    first = _work(search)
    _fill(history, HISTORY * 9, start=HISTORY)  # ten times the history
    again = _work(search)
    if connection.vendor == "postgresql":
        assert (first, again) == (0, 0)
    else:
        assert again < 3 * first  # a few steps more (FTS5 segments), not ten times as many


def test_a_search_reads_about_its_matches_and_no_more(history):
    Message.objects.filter(seq__in=[7, 70, 170]).update(title="the rare word quokka")
    work = _work(lambda: messages_search(viewer="alice", query="quokka", channel=None))
    found, more = messages_search(viewer="alice", query="quokka", channel=None)
    assert [m.seq for m in found] == [170, 70, 7] and not more
    if connection.vendor == "postgresql":
        assert work <= 2 * len(found)  # the matches, then the page's rows loaded
