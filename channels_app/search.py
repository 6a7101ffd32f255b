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

from django.db import connection
from django.db.models import BooleanField, ExpressionWrapper, Q, QuerySet
from django.db.models.expressions import RawSQL

from channels_app.budget import messages_within
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
    rows = Message.objects.all()
    if connection.vendor == "sqlite" and _fts5_available():
        phrases = " ".join(
            '"' + term.rstrip("*").replace('"', '""') + '"' + ("*" if term.endswith("*") else "")
            for term in terms
        )
        hits = RawSQL(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", [phrases])
        return rows.annotate(row=RawSQL("channels_app_message.rowid", [])).filter(row__in=hits)
    if connection.vendor == "postgresql":
        words = " ".join(term.rstrip("*") for term in terms)
        hit = RawSQL(f"{PG_VECTOR} @@ plainto_tsquery('simple', %s)", [words])
        return rows.annotate(hit=ExpressionWrapper(hit, output_field=BooleanField())).filter(
            hit=True
        )
    for term in terms:
        word = term.rstrip("*")
        rows = rows.filter(Q(title__icontains=word) | Q(body__icontains=word))
    return rows


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
    rows = _matching(terms)
    if channel is not None:
        rows = rows.filter(channel=channel)
    else:
        rows = rows.filter(channel__in=channels_visible_to(viewer))
    return messages_within(rows.order_by("-ts", "-seq"), limit=limit, max_bytes=max_bytes)
