"""Which held lock entries overlap a request's entries: looked up through the anchor index,
then decided exactly (``locks_app.globs``). Reads only.

Every path an entry covers lies at or below its literal anchor (``PathLockEntry.anchor``), so
two entries can overlap only when one's anchor is an ancestor of, equal to, or below the
other's. The candidates of a request are therefore the held entries whose anchor is one of
the ancestors-or-self of a requested anchor (one ``IN`` lookup) or lies below one (a prefix
range per requested anchor), both on the ``(channel, anchor)`` index: a lock or check of
concrete paths, or of patterns with a literal prefix, costs the same with 10 or 10,000 paths
held (issue 8 item 5; ``bench/bench_locks.py``). Only a requested ``.`` or leading-wildcard
pattern (anchor ``.``) has every held entry as a candidate, as it may overlap any of them.

Each candidate is then compared with the requested entries whose anchors it can meet: two
concrete paths by their strings, anything involving a pattern by ``paths_overlap``, paid from
the request's ``WorkBudget`` (PATH_LOCK_PATTERN_TOO_COMPLEX past it). Held patterns count
towards every later request that may overlap them.

A ``ConflictScan`` can run twice: first before the write transaction, where the comparisons
cost nothing to anyone waiting on the writer; then inside it, where it re-reads the candidate
ids and compares only the entries that appeared in between (an entry's path never changes
under its id). Case-insensitive matching uses ``anchor_folded`` and folded match keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from django.db import connection
from django.db.models import Q

from channels_app.models import Channel
from locks_app.globs import (
    WorkBudget,
    first_is_globstar,
    first_segments_meet,
    is_pattern,
    paths_overlap,
)
from locks_app.models import PathLockEntry
from locks_app.paths import WORKSPACE, PathEntry, anchor_key, match_key

IN_CHUNK = 500  # values per IN lookup (well under SQLite's limit on bound parameters)
RANGE_CHUNK = 64  # prefix ranges per query (a request has at most 64 paths)


@dataclass(frozen=True)
class _Wanted:
    key: str
    anchor: str
    pattern: bool
    first: str  # the first segment
    covers_all: bool  # "." or a leading "**": overlaps every entry


def _ancestors_or_self(anchor: str) -> Iterator[str]:
    """``.`` first, then each ``/``-prefix of ``anchor``, then ``anchor`` itself."""
    yield WORKSPACE
    if anchor == WORKSPACE:
        return
    end = anchor.find("/")
    while end != -1:
        yield anchor[:end]
        end = anchor.find("/", end + 1)
    yield anchor


def _concrete_overlap(left: str, right: str) -> bool:
    if WORKSPACE in (left, right) or left == right:
        return True
    return left.startswith(right + "/") or right.startswith(left + "/")


def _chunks(values: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


class ConflictScan:
    """The held entries of ``channel`` (other than ``exclude_lock_pk``'s) overlapping
    ``entries``; see the module doc."""

    def __init__(
        self,
        *,
        channel: Channel,
        entries: Iterable[PathEntry],
        case_insensitive: bool,
        budget: WorkBudget,
        exclude_lock_pk: int | None = None,
    ) -> None:
        self.channel = channel
        self.folded = case_insensitive
        self.field = "anchor_folded" if case_insensitive else "anchor"
        self.budget = budget
        self.exclude_lock_pk = exclude_lock_pk
        self.wanted: list[_Wanted] = []
        for entry in entries:
            key = match_key(entry.normalized_path, case_insensitive=case_insensitive)
            first = key.partition("/")[0]
            covers_all = key == WORKSPACE or first_is_globstar(first)
            self.wanted.append(_Wanted(key, anchor_key(key), is_pattern(key), first, covers_all))
        # anchor -> the wanted entries with that anchor; strict ancestor -> the wanted entries
        # below it: a candidate meets the first kind through its own ancestors-or-self, the
        # second through its anchor.
        self._at: dict[str, list[_Wanted]] = {}
        self._under: dict[str, list[_Wanted]] = {}
        for wanted in self.wanted:
            if wanted.anchor == WORKSPACE:
                continue  # compared with every candidate (below)
            self._at.setdefault(wanted.anchor, []).append(wanted)
            for ancestor in _ancestors_or_self(wanted.anchor):
                if ancestor != wanted.anchor:
                    self._under.setdefault(ancestor, []).append(wanted)
        # Wanted entries anchored at the workspace: ".", or a pattern from the first segment
        # on. Every held entry is their candidate, so their first segment is compared with
        # each distinct first segment of the candidates once (most of a tree shares few).
        self._root = [wanted for wanted in self.wanted if wanted.anchor == WORKSPACE]
        self._first: dict[tuple[int, str], bool] = {}
        self._verdicts: dict[int, bool] = {}  # entry pk -> overlaps a wanted entry

    def _candidates(self) -> list[tuple[int, int, str, str]]:
        """(entry pk, lock pk, normalized path, anchor) of every candidate."""
        rows = PathLockEntry.objects.filter(channel_id=self.channel.pk).order_by()
        if self.exclude_lock_pk is not None:
            rows = rows.exclude(lock_id=self.exclude_lock_pk)
        columns = ("pk", "lock_id", "normalized_path", self.field)
        anchors = sorted({wanted.anchor for wanted in self.wanted})
        if WORKSPACE in anchors:
            return list(rows.values_list(*columns))
        ancestors = sorted({a for anchor in anchors for a in _ancestors_or_self(anchor)})
        found: dict[int, tuple[int, int, str, str]] = {}
        for chunk in _chunks(ancestors, IN_CHUNK):
            for row in rows.filter(**{f"{self.field}__in": chunk}).values_list(*columns):
                found[row[0]] = row
        for chunk in _chunks(anchors, RANGE_CHUNK):
            for row in self._below_rows(chunk):
                found[row[0]] = row
        return list(found.values())

    def _below_rows(self, anchors: Sequence[str]) -> list[tuple[int, int, str, str]]:
        """The entries whose anchor lies below one of ``anchors``: one index range scan per
        anchor, joined to a VALUES list of the ranges. (As one WHERE with an OR of many
        ranges, SQLite's planner scanned the whole channel; as a UNION of ORM querysets,
        compiling them cost 25 ms.) A range is ['a/', 'a0'), '0' following '/', compared by
        code point: SQLite compares text bytewise in UTF-8, and PostgreSQL's ``~>=~`` /
        ``~<~`` are the bytewise operators of the text_pattern_ops index (its collations do
        not order by code point)."""
        meta = PathLockEntry._meta
        quote = connection.ops.quote_name
        column = quote(meta.get_field(self.field).column)
        if connection.vendor == "postgresql":
            values = ", ".join(["(%s::text, %s::text)"] * len(anchors))
            ranges = f"(VALUES {values}) AS r (low, high)"
            within = f"e.{column} ~>=~ r.low AND e.{column} ~<~ r.high"
        elif connection.vendor == "sqlite":
            values = ", ".join(["(%s, %s)"] * len(anchors))
            ranges = f"(VALUES {values}) AS r"
            within = f"e.{column} >= r.column1 AND e.{column} < r.column2"
        else:  # not a database this project runs on: correct, if slower
            rows = PathLockEntry.objects.filter(channel_id=self.channel.pk).order_by()
            if self.exclude_lock_pk is not None:
                rows = rows.exclude(lock_id=self.exclude_lock_pk)
            condition = Q()
            for anchor in anchors:
                condition |= Q(**{f"{self.field}__startswith": anchor + "/"})
            columns = ("pk", "lock_id", "normalized_path", self.field)
            return list(rows.filter(condition).values_list(*columns))
        lock = quote(meta.get_field("lock").column)
        sql = (
            f"SELECT e.{quote(meta.pk.column)}, e.{lock}, e.{quote('normalized_path')}, "
            f"e.{column} FROM {ranges} JOIN {quote(meta.db_table)} AS e "
            f"ON e.{quote(meta.get_field('channel').column)} = %s AND {within}"
        )
        params: list[object] = [b for anchor in anchors for b in (anchor + "/", anchor + "0")]
        params.append(self.channel.pk)
        if self.exclude_lock_pk is not None:
            sql += f" AND e.{lock} <> %s"
            params.append(self.exclude_lock_pk)
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            return [tuple(row) for row in cursor.fetchall()]

    def _meets(self, anchor: str) -> Iterator[_Wanted]:
        if anchor == WORKSPACE:
            yield from self._at.get(WORKSPACE, ())
        else:
            for ancestor in _ancestors_or_self(anchor):
                yield from self._at.get(ancestor, ())
        yield from self._under.get(anchor, ())

    def _root_overlaps(self, key: str) -> bool:
        first = key.partition("/")[0]
        if first[0] == "*" and first_is_globstar(first):
            return True  # a held entry from "**" on covers everything
        for index, wanted in enumerate(self._root):
            if wanted.covers_all:
                return True
            known = self._first.get((index, first))
            if known is None:
                known = self._first[(index, first)] = first_segments_meet(
                    wanted.first, first, self.budget
                )
            else:
                self.budget.spend(1)
            if known and paths_overlap(wanted.key, key, self.budget):
                return True
        return False

    def _overlaps(self, path: str, anchor: str) -> bool:
        key = match_key(path, case_insensitive=self.folded)
        if key == WORKSPACE:
            return True  # the held workspace covers whatever is wanted
        if self._root and self._root_overlaps(key):
            return True
        if not self._at and not self._under:
            return False
        held_pattern = is_pattern(key)
        for wanted in self._meets(anchor):
            if not wanted.pattern and not held_pattern:
                # Both concrete: comparing strings is cheap and bounded by the rows read.
                if _concrete_overlap(wanted.key, key):
                    return True
            elif paths_overlap(wanted.key, key, self.budget):
                return True
        return False

    def run(self) -> set[int]:
        """The pks of the locks holding an overlapping entry now. Entries compared by an
        earlier run are not compared again. Raises PATH_LOCK_PATTERN_TOO_COMPLEX."""
        conflicts: set[int] = set()
        for pk, lock_pk, path, anchor in self._candidates():
            verdict = self._verdicts.get(pk)
            if verdict is None:
                verdict = self._verdicts[pk] = self._overlaps(path, anchor)
            if verdict:
                conflicts.add(lock_pk)
        return conflicts
