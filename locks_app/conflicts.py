"""Which held lock entries overlap a request's entries: looked up through the anchor index,
then decided exactly (``locks_app.globs``). Reads only.

Every path an entry covers lies at or below its literal anchor (``PathLockEntry.index_key`` is
``<channel id>:<anchor>``), so
two entries can overlap only when one's anchor is an ancestor of, equal to, or below the
other's. The candidates of a request are therefore the held entries whose anchor is one of
the ancestors-or-self of a requested anchor or lies below one: an equality or a prefix-range
probe of the key's index for each (all in one query): a lock or check of
concrete paths, or of patterns with a literal prefix, costs the same with 10 or 10,000 paths
held (``bench/bench_locks.py``). Only a requested ``.`` or leading-wildcard
pattern (anchor ``.``) has every held entry as a candidate, as it may overlap any of them.

Each candidate is then compared with the requested entries whose anchors it can meet: two
concrete paths by their strings, anything involving a pattern by ``paths_overlap``, paid from
the request's ``WorkBudget`` (PATH_LOCK_PATTERN_TOO_COMPLEX past it). Held patterns count
towards every later request that may overlap them, except that a held pattern anchored at the
workspace (``*.md``), a candidate of every request, is compared with the requested concrete
paths on an allowance of its own that covers the comparison's cost: how many of those a
channel may hold is capped instead (``AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS``,
PATH_LOCK_TOO_MANY_PATTERNS), so that others' patterns can neither refuse nor stall a request.

A ``ConflictScan`` can run twice: first before the write transaction, where the comparisons
cost nothing to anyone waiting on the writer; then inside it, where it reads only the entries
written in between (a range of the primary key) and checks that the locks found still exist,
so the work inside the writer's lock is bounded by what was written meanwhile. A request
probes at most ``MAX_PROBES`` keys. Case-insensitive matching uses ``index_key_folded`` and
folded match keys.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from django.db import connection, transaction
from django.db.models import Field, Q

from agentchat.core.rules.errors import AppError
from channels_app.models import Channel
from locks_app.globs import (
    MAX_PATTERN_WILDCARDS,
    WorkBudget,
    first_is_globstar,
    first_segments_meet,
    is_pattern,
    paths_overlap,
)
from locks_app.models import PathLock, PathLockEntry
from locks_app.paths import WORKSPACE, PathEntry, anchor_key, index_key, match_key

# SELECTs per UNION ALL: SQLite allows 500 terms in a compound SELECT, and each has 3-4 bound
# parameters (SQLite allows 32,766).
PROBES_PER_QUERY = 200
# Index probes per request: 64 paths 15 segments deep in distinct folders; ten queries.
MAX_PROBES = 2000
T = TypeVar("T")


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


def _concrete_allowance(key: str) -> int:
    """The most ``paths_overlap`` of the concrete ``key`` and one pattern can spend: 1, plus per
    segment pair 1 and the name's length times one plus the pattern segment's classes (at most
    ``MAX_PATTERN_WILDCARDS`` in all, ``globs._Segment.match_cost``)."""
    names = key.split("/")
    longest = max(len(name) for name in names)
    return 1 + len(names) + len(key) + MAX_PATTERN_WILDCARDS * longest


def _chunks(values: Sequence[T], size: int) -> Iterator[Sequence[T]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _column(name: str) -> str:
    """The column of a field of PathLockEntry, ``pk`` its key (the stubs allow a relation's
    reverse side and a field without a column: neither is asked for here)."""
    meta = PathLockEntry._meta
    field = meta.pk if name == "pk" else meta.get_field(name)
    return cast(str, cast("Field[Any, Any]", field).column)


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
        self.field = "index_key_folded" if case_insensitive else "index_key"
        self._prefix = index_key(channel.pk, "")
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
        self._hits: dict[int, int] = {}  # entry pk -> lock pk, of the overlapping entries
        self._seen: int | None = None  # the greatest entry pk read
        has_root = any(wanted.anchor == WORKSPACE for wanted in self.wanted)
        self._probes = None if has_root else self._probe_list()
        # A held pattern anchored at the workspace is a candidate of every request: comparing
        # it with the requested concrete paths is paid from ``held_budget``, which grows by
        # ``_held_allowance`` for each such candidate, an upper bound of that comparison's
        # cost (``_concrete_allowance``). So another agent's patterns never make a request of
        # concrete paths fail; their number per channel is capped instead
        # (AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS), which bounds the work.
        self.held_budget = WorkBudget(0)
        self._held_allowance = sum(
            _concrete_allowance(wanted.key)
            for wanted in self.wanted
            if not wanted.pattern and wanted.anchor != WORKSPACE
        )

    def _probe_list(self) -> list[tuple[str, str | None]]:
        """The index probes of a request without a workspace-anchored entry: each
        ancestor-or-self of a requested anchor (equality), and below each (a range).
        Raises PATH_LOCK_PATTERN_TOO_COMPLEX past ``MAX_PROBES``."""
        anchors = sorted({wanted.anchor for wanted in self.wanted})
        key = self._prefix
        probes: list[tuple[str, str | None]] = [
            (key + ancestor, None)
            for ancestor in sorted({a for anchor in anchors for a in _ancestors_or_self(anchor)})
        ]
        probes += [(f"{key}{anchor}/", f"{key}{anchor}0") for anchor in anchors]
        if len(probes) > MAX_PROBES:
            raise AppError(
                "PATH_LOCK_PATTERN_TOO_COMPLEX",
                f"these paths need {len(probes)} index lookups, more than {MAX_PROBES}: "
                "lock fewer or shallower paths per request",
                detail={"probes": len(probes), "limit": MAX_PROBES},
            )
        return probes

    def _candidates(self) -> list[tuple[int, int, str, str]]:
        """(entry pk, lock pk, normalized path, anchor) of every candidate."""
        if self._probes is None:
            rows = PathLockEntry.objects.filter(channel_id=self.channel.pk).order_by()
            if self.exclude_lock_pk is not None:
                rows = rows.exclude(lock_id=self.exclude_lock_pk)
            found: Iterable[tuple[int, int, str, str]] = rows.values_list(
                "pk", "lock_id", "normalized_path", self.field
            )
        else:
            # An entry can answer two probes (equal to one ancestor, below another anchor).
            unique = {
                row[0]: row
                for chunk in _chunks(self._probes, PROBES_PER_QUERY)
                for row in self._probe(chunk)
            }
            found = list(unique.values())
        skip = len(self._prefix)
        return [(pk, lock_pk, path, stored[skip:]) for pk, lock_pk, path, stored in found]

    def _since(self, seen: int) -> list[tuple[int, int, str, str]]:
        """(entry pk, lock pk, normalized path, anchor) of every entry of the channel written
        after the entry ``seen`` (a candidate read earlier), candidate or not (``_overlaps``
        is exact either way): one range of the primary key, as small as what was written in
        between. Read as a range of the key alone, so that no planner scans the channel's
        entries for it; other channels' rows in the range are dropped here."""
        rows = PathLockEntry.objects.filter(pk__gt=seen).order_by()
        found = rows.values_list("pk", "lock_id", "channel_id", "normalized_path", self.field)
        skip = len(self._prefix)
        return [
            (pk, lock_pk, path, stored[skip:])
            for pk, lock_pk, channel_pk, path, stored in found
            if channel_pk == self.channel.pk and lock_pk != self.exclude_lock_pk
        ]

    def _probe(self, probes: Sequence[tuple[str, str | None]]) -> list[tuple[int, int, str, str]]:
        """The entries whose key equals ``low`` (``high`` None) or lies in [low, high), for each
        probe: one SELECT per probe, with its bounds as constants, joined by UNION ALL.

        Why not the ORM: an OR of many ranges made SQLite scan the whole channel, a UNION of
        ORM querysets cost 25 ms to compile, and PostgreSQL without fresh statistics planned a
        join to a VALUES list of the bounds, or a long IN list, as a scan of the channel; a
        probe with constants on a column that only one index holds is an index search on
        either database, analyzed or not. A range is ['…a/', '…a0') ('0' follows '/'),
        compared by code point: SQLite compares text bytewise in UTF-8, PostgreSQL's ``~>=~``
        / ``~<~`` are the bytewise operators of the text_pattern_ops index (its collations do
        not order by code point).
        """
        if connection.vendor == "postgresql":
            at_least, below = "~>=~", "~<~"
        elif connection.vendor == "sqlite":
            at_least, below = ">=", "<"
        else:  # not a database this project runs on: correct, if slower
            return self._probe_orm(probes)
        meta = PathLockEntry._meta
        quote = connection.ops.quote_name
        column = quote(_column(self.field))
        lock = quote(_column("lock"))
        head = (
            f"SELECT {quote(_column('pk'))}, {lock}, {quote('normalized_path')}, {column} "
            f"FROM {quote(meta.db_table)} WHERE "
        )
        tail = f" AND {lock} <> %s" if self.exclude_lock_pk is not None else ""
        branches: list[str] = []
        params: list[Any] = []
        for low, high in probes:
            if high is None:
                branches.append(f"{head}{column} = %s{tail}")
                params.append(low)
            else:
                branches.append(f"{head}{column} {at_least} %s AND {column} {below} %s{tail}")
                params += [low, high]
            if tail:
                params.append(self.exclude_lock_pk)
        # One statement reads one snapshot on either database. On SQLite a transaction here
        # would be an IMMEDIATE one, i.e. the writer's lock, for a read (a check would queue
        # behind every write): the statement runs on its own, or in the caller's transaction.
        # PostgreSQL needs one for SET LOCAL, and a read there takes no writer's lock.
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                cursor.execute(" UNION ALL ".join(branches), params)
                return [tuple(row) for row in cursor.fetchall()]
        with transaction.atomic(savepoint=False), connection.cursor() as cursor:
            # The probes find a handful of rows; without statistics PostgreSQL planned the
            # union in parallel, and starting its workers cost 25 ms here.
            cursor.execute("SET LOCAL max_parallel_workers_per_gather = 0")
            cursor.execute(" UNION ALL ".join(branches), params)
            return [tuple(row) for row in cursor.fetchall()]

    def _probe_orm(
        self, probes: Sequence[tuple[str, str | None]]
    ) -> list[tuple[int, int, str, str]]:
        rows = PathLockEntry.objects.order_by()
        if self.exclude_lock_pk is not None:
            rows = rows.exclude(lock_id=self.exclude_lock_pk)
        condition = Q()
        for low, high in probes:
            if high is None:
                condition |= Q(**{self.field: low})
            else:
                condition |= Q(**{f"{self.field}__startswith": low})
        columns = ("pk", "lock_id", "normalized_path", self.field)
        return list(rows.filter(condition).values_list(*columns))

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
        held_root = held_pattern and anchor == WORKSPACE
        for wanted in self._meets(anchor):
            if not wanted.pattern and not held_pattern:
                # Both concrete: comparing strings is cheap and bounded by the rows read.
                if _concrete_overlap(wanted.key, key):
                    return True
                continue
            budget = self.held_budget if held_root and not wanted.pattern else self.budget
            if paths_overlap(wanted.key, key, budget):
                return True
        return False

    def run(self) -> set[int]:
        """The pks of the locks holding an overlapping entry now. The first run reads the
        candidates; a later one reads only the entries written since (``_since``) and checks
        that the locks found before still exist (an entry's path never changes under its
        lock, and a recovery keeps the entries). Entries are compared once.

        Why the entries written since are those with a greater pk: every writer of a
        channel's entries first serializes on the channel (``services._serialize_channel``;
        on SQLite the writer is global), and takes its pks under it. So an entry that the
        first read did not see was written by a transaction holding the channel after every
        writer of an entry it saw, with greater pks. Raises PATH_LOCK_PATTERN_TOO_COMPLEX."""
        if self._seen is None:
            rows = self._candidates()
        else:
            rows = self._since(self._seen)
            if self._hits:
                alive = set(
                    PathLock.objects.filter(pk__in=set(self._hits.values())).values_list(
                        "pk", flat=True
                    )
                )
                self._hits = {pk: lock for pk, lock in self._hits.items() if lock in alive}
        for pk, lock_pk, path, anchor in rows:
            if self._seen is None or pk > self._seen:
                self._seen = pk
            verdict = self._verdicts.get(pk)
            if verdict is None:
                if anchor == WORKSPACE and self._held_allowance and is_pattern(path):
                    self.held_budget.grant(self._held_allowance)
                verdict = self._verdicts[pk] = self._overlaps(path, anchor)
            if verdict:
                self._hits[pk] = lock_pk
        return set(self._hits.values())
