"""Paged lists (so that no client can hurt another): one mechanism for every list endpoint
(channels, a channel's tasks, its locks) and the surfaces that will list them too.

A page is at most ``limit`` items (1-``LIST_LIMIT_MAX``, default the maximum) and about
``AGENTCHAT_READ_MAX_BYTES`` of JSON, always at least one item, in the list's key order
(channel name, task id, lock id). The body keeps the list under its old key and adds
``"more": true|false``; with more, ``"next"`` is the key to pass as ``after`` (exclusive), so
paging gives every item once, in order. A small list is one page: old clients keep working.

The work is bounded as well as the answer. Before loading anything, ``list_page`` plans the
page from a size the database computes per row (``OctetLength`` summed by ``size_of`` over the
columns that can be big), reading only keys and sizes, in planning queries that start small
and double: on PostgreSQL a size costs converting the row's JSON to text (2.6 ms for a task of
700 KB here), so a plan that stopped only at ``limit`` would cost what loading costs. Then one
query loads the planned rows (with whatever the list joins: the channel list's unread counts
stay one query per page), and each is rendered once, to the bytes sent; a row whose rendering
is bigger than planned ends the page early, so the budget holds whatever the plan said.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from django.conf import settings
from django.db.models import Expression, F, Func, IntegerField, QuerySet, Subquery, Value
from django.db.models.functions import Coalesce
from django.http import HttpResponse
from rest_framework import serializers

from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.validation import int_parse

if TYPE_CHECKING:
    from django.db.backends.base.base import BaseDatabaseWrapper
    from django.db.models.sql.compiler import SQLCompiler

LIST_LIMIT_MAX = 1000  # items per page (also the default)
# Rows the first planning query sizes; each next one sizes twice as many (up to what the page
# can still take). A few small queries for a page of 1000 small rows, and a plan of big rows
# stops after sizing about twice the budget.
PLAN_FIRST = 8
# What a row's record holds besides the sized columns (keys, timestamps, short fields), added
# to every planned size. The plan is an estimate; the rendered bytes decide.
ROW_OVERHEAD = 256


class PageWindow(NamedTuple):
    """The page a list request asks for: the items after the key ``after`` (exclusive; None
    from the first), at most ``limit`` of them. Parsed once at the boundary (``window_parse``),
    passed down to the selector and ``list_page`` as one value."""

    after: str | None = None
    limit: int = LIST_LIMIT_MAX


class ListPage(NamedTuple):
    parts: list[bytes]  # each item's JSON, in key order
    more: bool  # items remain after the last one
    next: str | None  # the last item's key when ``more``: the next page's ``after``


class OctetLength(Func):
    """The bytes of a column's text (a JSON column as its JSON text), computed in SQL without
    sending the value: ``octet_length`` on PostgreSQL, the length of a BLOB cast on SQLite
    (whose ``length`` of text counts characters)."""

    output_field = IntegerField()

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, Any]:
        if template is None:
            template = (
                "length(CAST(%(expressions)s AS BLOB))"
                if connection.vendor == "sqlite"
                else "octet_length((%(expressions)s)::text)"
            )
        return super().as_sql(compiler, connection, function, template, arg_joiner, **extra_context)


def size_of(*columns: str | Expression | Subquery[Any], overhead: int = ROW_OVERHEAD) -> Expression:
    """A row's planned JSON size: the bytes of ``columns`` (names or expressions already
    counting bytes, such as a subquery's sum), NULL counting 0, plus ``overhead``."""
    total: Expression = Value(overhead)
    for column in columns:
        counted = OctetLength(F(column)) if isinstance(column, str) else column
        total = total + Coalesce(counted, 0)
    return total


def limit_parse(
    raw: str | None, *, maximum: int = LIST_LIMIT_MAX, default: int | None = None
) -> int:
    """``?limit=`` of any list or read: 1-``maximum`` in ASCII digits, ``default`` (else
    ``maximum``) when absent. Raises INVALID_VALUE."""
    return int_parse(
        raw,
        field="limit",
        code="INVALID_VALUE",
        minimum=1,
        maximum=maximum,
        default=maximum if default is None else default,
    )


def after_parse(raw: str | None, check: Callable[[str], object]) -> str | None:
    """``?after=``: None when absent or empty, else what ``check`` (the key's own rule, which
    raises its own code) accepts."""
    if raw is None or raw == "":
        return None
    check(raw)
    return raw


def window_parse(query: Mapping[str, str], after_check: Callable[[str], object]) -> PageWindow:
    """A list page's ``?after=&limit=`` (``after_parse`` with the key's own rule, then
    ``limit_parse``; the limit judged first)."""
    limit = limit_parse(query.get("limit"))
    return PageWindow(after_parse(query.get("after"), after_check), limit)


def _plan(
    rows: QuerySet[Any], *, key: str, size: Expression, limit: int, max_bytes: int, step: int
) -> tuple[str | None, bool]:
    """The last key of the page ``rows`` starts (None for an empty list) and whether rows
    remain after it, from planned sizes only, sizing ``step`` rows first."""
    planned = taken = 0
    last: str | None = None
    while True:
        following = rows.filter(**{f"{key}__gt": last}) if last is not None else rows
        # One row more than the page can take tells whether more remain.
        want = min(step, limit - taken + 1)
        sizes = list(following.annotate(_page_size=size).values_list(key, "_page_size")[:want])
        for row_key, row_size in sizes:
            if taken >= limit or (taken and planned + row_size + 1 > max_bytes):
                return last, True
            planned += row_size + 1
            taken += 1
            last = row_key
        if len(sizes) < want:
            return last, False
        step *= 2


def list_page(
    rows: QuerySet[Any],
    *,
    key: str,
    size: Expression,
    window: PageWindow,
    load: Callable[[QuerySet[Any]], Iterable[Any]],
    render: Callable[[Any], dict[str, Any]],
    max_bytes: int | None = None,
    plan_first: int = PLAN_FIRST,
) -> ListPage:
    """The page ``window`` of ``rows``, ordered by ``key`` (a unique column): the items after
    the key ``window.after``, at most ``window.limit`` of them and about ``max_bytes``
    (AGENTCHAT_READ_MAX_BYTES) of JSON, at least one. ``size`` is the row's planned size
    (``size_of``); ``load`` fetches the planned rows (a queryset of them, in key order) with
    what ``render`` needs, and ``render`` makes an item's record. ``plan_first`` is how many
    rows the first planning query sizes: a list whose sizes come from short text columns only
    (no JSON to convert) plans in one query with ``LIST_LIMIT_MAX + 1``."""
    after, limit = window
    max_bytes = max_bytes or settings.AGENTCHAT_READ_MAX_BYTES
    rows = rows.order_by(key)
    while True:
        following = rows.filter(**{f"{key}__gt": after}) if after is not None else rows
        last, more = _plan(
            following, key=key, size=size, limit=limit, max_bytes=max_bytes, step=plan_first
        )
        if last is None:
            return ListPage([], False, None)
        parts: list[bytes] = []
        total = 0
        delivered: str | None = None
        for item in load(following.filter(**{f"{key}__lte": last})):
            part = json_bytes(render(item))
            if parts and (len(parts) >= limit or total + len(part) > max_bytes):
                return ListPage(parts, True, delivered)  # bigger than planned: the rest next
            parts.append(part)
            total += len(part) + 1
            delivered = getattr(item, key)
        if parts or not more:
            return ListPage(parts, more, delivered if more else None)
        after = last  # every planned row went away meanwhile (an unlock): plan on from there


def page_body(name: str, page: ListPage) -> bytes:
    """``{"<name>": [...], "more": …, "next"?: …}`` from the rendered parts."""
    tail = b',"next":' + json_bytes(page.next) if page.more else b""
    return b'{"%s":[%s],"more":%s%s}' % (
        name.encode(),
        b",".join(page.parts),
        b"true" if page.more else b"false",
        tail,
    )


def page_response(name: str, page: ListPage) -> HttpResponse:
    return HttpResponse(page_body(name, page), content_type="application/json")


class PageOutput(serializers.Serializer[Any]):
    """The page fields of a list's response; a list's output adds its items' key."""

    more = serializers.BooleanField(help_text="items remain after this page: ask with `after`")
    next = serializers.CharField(
        required=False,
        help_text="only with `more: true`: the last item's key, to pass as `after`",
    )
