"""Search across messages: title and body, per channel or everywhere the searcher
may see, newest first. The database's full-text search where there is one — SQLite's FTS5 (an
external-content table kept by triggers), PostgreSQL's ``to_tsvector('simple', …)`` behind a
GIN index (both made by migration 0007) — and a plain substring match elsewhere.

The query is the searcher's words, never a query language: each word (at most
SEARCH_TERMS_MAX, each at most SEARCH_TERM_MAX characters) must appear; FTS5 gets each as a
quoted phrase, PostgreSQL ``plainto_tsquery``, so no input is a syntax error or an expensive
expression. Words match whole tokens, and on SQLite a trailing ``*`` of a word matches a prefix.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connection, transaction
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL

from channels_app.budget import messages_planned, messages_within
from channels_app.models import Channel, Message
from channels_app.selectors import channels_visible_to
from channels_app.words import search_terms

SEARCH_LIMIT_MAX = 200
FTS_TABLE = "channels_app_message_fts"


def _fts5_available() -> bool:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM sqlite_master WHERE name = %s", [FTS_TABLE])
        return cursor.fetchone() is not None


# The very expression migration 0007 indexes on PostgreSQL (the index serves only this one).
PG_VECTOR = "to_tsvector('simple', title || ' ' || body)"


def _matching(terms: list[str]) -> QuerySet[Message]:
    """The matches on SQLite (FTS5: its index answers the rowids, the outer query looks them
    up by rowid) and elsewhere (a plain match); PostgreSQL has ``_pg_sizes``."""
    rows = Message.objects.all()
    if connection.vendor == "sqlite" and _fts5_available():
        phrases = " ".join(
            '"' + term.rstrip("*").replace('"', '""') + '"' + ("*" if term.endswith("*") else "")
            for term in terms
        )
        hits = RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [phrases])
        return rows.annotate(row=RawSQL("channels_app_message.rowid", [])).filter(row__in=hits)
    for term in terms:
        word = term.rstrip("*")
        rows = rows.filter(Q(title__icontains=word) | Q(body__icontains=word))
    return rows


_PLANS = ("enable_seqscan", "enable_indexscan", "enable_indexonlyscan")


@contextmanager
def _bitmap_plans() -> Iterator[None]:
    """The block's queries planned with bitmap scans only (PostgreSQL), for this transaction
    only (``set_config(..., true)``), restored after."""
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SELECT " + ", ".join(f"current_setting('{name}')" for name in _PLANS))
            before = cursor.fetchone()
            cursor.execute("SELECT " + ", ".join(f"set_config('{n}', 'off', true)" for n in _PLANS))
        yield  # an error rolls the transaction (or its savepoint) back, and the settings
        with connection.cursor() as cursor:
            restore = ", ".join(f"set_config('{name}', %s, true)" for name in _PLANS)
            cursor.execute("SELECT " + restore, list(before))


def _pg_sizes(
    terms: list[str], *, viewer: str, channel: Channel | None, limit: int
) -> list[tuple[str, int]]:
    """The keys and sizes of the first ``limit`` matches, newest first (PostgreSQL).

    The matches are read from the GIN index alone: a fenced subquery (OFFSET 0: never merged
    into the outer query) with the text condition only, its rows carrying all the outer query
    needs (the channel, the order, the size), planned with bitmap scans only. Left to choose,
    the planner scanned the messages and computed ``to_tsvector`` of every title and body
    whenever its statistics were missing (a table just filled) or it guessed a word common: a
    word that matches nothing cost 410 ms over 6,200 messages, and a channel's search as much
    through the channel's index. So the work is the matches, never the history."""
    words = " ".join(term.rstrip("*") for term in terms)
    if channel is not None:
        where, params = "h.channel_id = %s", [channel.pk]
    else:
        visible, visible_params = (
            channels_visible_to(viewer).order_by().values("pk").query.sql_with_params()
        )
        where, params = f"h.channel_id IN ({visible})", list(visible_params)
    sql = (
        "SELECT h.id, h.json_size FROM (SELECT id, channel_id, ts, seq, json_size "
        f"FROM {Message._meta.db_table} WHERE {PG_VECTOR} @@ plainto_tsquery('simple', %s) "
        f"OFFSET 0) AS h WHERE {where} ORDER BY h.ts DESC, h.seq DESC LIMIT %s"
    )
    with _bitmap_plans(), connection.cursor() as cursor:
        cursor.execute(sql, [words, *params, limit])
        return [(pk, size) for pk, size in cursor.fetchall()]


def messages_search(
    *,
    viewer: str,
    query: object,
    channel: Channel | None = None,
    limit: int = 50,
    max_bytes: int | None = None,
) -> tuple[list[Message], bool]:
    """Messages whose title or body hold every word of ``query``, in ``channel`` (which the
    caller looked up as ``viewer``) or in every channel ``viewer`` may see; newest first, at
    most ``limit`` and about ``max_bytes`` (AGENTCHAT_READ_MAX_BYTES) of JSON, at least one;
    and whether more matched. Raises INVALID_VALUE."""
    terms = search_terms(query)
    if connection.vendor == "postgresql":
        sizes = _pg_sizes(terms, viewer=viewer, channel=channel, limit=limit + 1)
        return messages_planned(sizes, limit=limit, max_bytes=max_bytes)
    rows = _matching(terms)
    if channel is not None:
        rows = rows.filter(channel=channel)
    else:
        rows = rows.filter(channel__in=channels_visible_to(viewer))
    return messages_within(rows.order_by("-ts", "-seq"), limit=limit, max_bytes=max_bytes)
