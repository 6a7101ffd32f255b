"""Every read of locks_app: lock records, conflicts, lookups by id or path.

Records are spelled by ``locks_app.records``; conflicts are found by ``locks_app.conflicts``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from django.conf import settings
from django.db.models import F, IntegerField, OuterRef, Prefetch, QuerySet, Subquery, Sum

from agentchat.core.http import pages
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.fence import fence_state
from agentchat.core.rules.names import record_id_check
from agentchat.core.rules.paths import safe_text
from agentchat.core.rules.records import is_expired
from channels_app.models import Channel
from locks_app import records
from locks_app.bounds import conflicts_body, conflicts_listed
from locks_app.conflicts import ConflictScan
from locks_app.globs import WorkBudget
from locks_app.models import LockFence, PathLock, PathLockEntry
from locks_app.paths import (
    LockPaths,
    PathEntry,
    anchor_key,
    index_key,
    match_key,
    path_normalize,
)
from locks_app.paths import lock_paths_parse as paths_parse

LOCK_ID_MAX = 64


def case_insensitive() -> bool:
    return bool(settings.AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE)


def _locks(channel: Channel) -> QuerySet[PathLock]:
    entries = Prefetch("entries", queryset=PathLockEntry.objects.order_by("position"))
    return (
        PathLock.objects.filter(channel=channel)
        .select_related("channel")
        .prefetch_related(entries)
        .order_by("lock_id")
    )


def lock_list(*, channel: Channel) -> list[PathLock]:
    """Every lock of the channel, active and expired, by lock id (the whole list: the API pages
    with ``lock_page``)."""
    return list(_locks(channel))


def lock_iter_for_channel(*, channel: Channel, chunk_size: int) -> Iterator[PathLock]:
    """``lock_list`` streamed ``chunk_size`` locks at a time (their entries fetched per
    chunk): the folder sync's memory stays one chunk's."""
    return _locks(channel).iterator(chunk_size=chunk_size)


# A lock's planned size in a list: its paths (up to 64, of up to 1 KB, spelled twice) and a
# recovery reason, plus the record's fixed fields.
LOCK_SIZE = pages.size_of(
    "owner",
    "previous_owner",
    "recovery_reason",
    Subquery(
        PathLockEntry.objects.filter(lock=OuterRef("pk"))
        .order_by()
        .values("lock")
        .annotate(
            n=Sum(
                pages.OctetLength(F("normalized_path")) + pages.OctetLength(F("display_path")) + 64
            )
        )
        .values("n"),
        output_field=IntegerField(),
    ),
    overhead=384,
)


def _locks_loaded(rows: QuerySet[PathLock]) -> QuerySet[PathLock]:
    entries = Prefetch("entries", queryset=PathLockEntry.objects.order_by("position"))
    return rows.select_related("channel").prefetch_related(entries)


def lock_page(
    *,
    channel: Channel,
    after: str | None = None,
    limit: int = pages.LIST_LIMIT_MAX,
) -> pages.ListPage:
    """A page of the channel's locks (``records.lock_to_dict``), active and expired, after the
    lock id ``after``, by lock id (``agentchat.core.http.pages``): expired locks stay until someone
    unlocks or recovers them, so the list has no bound of its own. The sizes are sums of short
    columns, cheap to compute for a whole page: one planning query."""
    return pages.list_page(
        PathLock.objects.filter(channel=channel),
        key="lock_id",
        size=LOCK_SIZE,
        window=pages.PageWindow(after, limit),
        load=_locks_loaded,
        render=records.lock_api_dict,
        plan_first=pages.LIST_LIMIT_MAX + 1,  # sizes of short text columns: one planning query
    )


def locks_by_pk(pks: Iterable[int]) -> list[PathLock]:
    """The lock records with these primary keys (with channel and entries), by lock id."""
    return list(
        PathLock.objects.filter(pk__in=list(pks))
        .select_related("channel")
        .prefetch_related(Prefetch("entries", queryset=PathLockEntry.objects.order_by("position")))
        .order_by("lock_id")
    )


def lock_conflict_scan(
    *,
    channel: Channel,
    entries: Iterable[PathEntry],
    budget: WorkBudget,
    exclude_lock_pk: int | None = None,
) -> ConflictScan:
    """A scan for the held entries overlapping ``entries`` (``locks_app.conflicts``)."""
    return ConflictScan(
        channel=channel,
        entries=entries,
        case_insensitive=case_insensitive(),
        budget=budget,
        exclude_lock_pk=exclude_lock_pk,
    )


def lock_paths_parse(raw_paths: object) -> LockPaths:
    """A request's paths (any JSON value), normalized under the server's case setting, with
    the request's work budget (``locks_app.paths.lock_paths_parse``): the boundary's parse of
    the paths of a lock or a check.

    Raises PATH_LOCK_INVALID_PATH, PATH_LOCK_PATTERN_TOO_COMPLEX, PATH_LOCK_CONFLICT (two
    requested paths overlap, as in the reference, whose check normalizes like lock).
    """
    return paths_parse(raw_paths, case_insensitive=case_insensitive())


def lock_check(*, channel: Channel, paths: LockPaths) -> dict[str, Any]:
    """The check answer: the lock records overlapping ``paths``, expired ones included
    (flagged ``expired``), the first ``CONFLICTS_SHOWN`` of them when there are more
    (``locks_app.bounds.conflicts_body``).

    Raises PATH_LOCK_PATTERN_TOO_COMPLEX (the comparisons spend the request's budget).
    """
    conflicts = lock_conflict_scan(
        channel=channel, entries=paths.entries, budget=paths.budget
    ).run()
    listed, _expired = conflicts_listed(conflicts, clock.now())
    return conflicts_body(listed, len(conflicts))


def lock_id_check(lock_id: object) -> str:
    """Raises PATH_LOCK_INVALID_LOCK_ID unless ``lock_id`` is a record id (uuid hex here; an
    imported folder may carry any ``[A-Za-z0-9][A-Za-z0-9._-]*``)."""
    return record_id_check(
        lock_id,
        what="lock id",
        code="PATH_LOCK_INVALID_LOCK_ID",
        max_length=LOCK_ID_MAX,
        detail={"lock_id": safe_text(lock_id)},
    )


def _not_found(target: object) -> AppError:
    return AppError(
        "PATH_LOCK_NOT_FOUND",
        f"lock record does not exist: {safe_text(target, 200)}",
        detail={"target": safe_text(target)},
    )


def lock_get(*, channel: Channel, lock_id: str) -> PathLock:
    """Raises PATH_LOCK_INVALID_LOCK_ID, PATH_LOCK_NOT_FOUND."""
    lock_id_check(lock_id)
    lock = _locks(channel).filter(lock_id=lock_id).first()
    if lock is None:
        raise _not_found(lock_id)
    return lock


def lock_find_by_path(*, channel: Channel, path: str) -> PathLock:
    """The lock holding exactly this normalized path (the reference's unlock/recover target).

    A path that does not normalize names no lock: PATH_LOCK_NOT_FOUND, as in the reference.
    Two records holding it (only possible in imported data) → PATH_LOCK_CONFLICT.
    """
    folded = case_insensitive()
    try:
        entry = path_normalize(path, case_insensitive=folded)
    except AppError:
        raise _not_found(path) from None
    wanted = match_key(entry.normalized_path, case_insensitive=folded)
    field = "index_key_folded" if folded else "index_key"
    # Every entry of that exact path has that anchor: one index lookup, then exact keys.
    holders = {
        lock_pk
        for lock_pk, normalized in PathLockEntry.objects.filter(
            **{field: index_key(channel.pk, anchor_key(wanted))}
        )
        .order_by()
        .values_list("lock_id", "normalized_path")
        if match_key(normalized, case_insensitive=folded) == wanted
    }
    matches = locks_by_pk(holders)
    if not matches:
        raise _not_found(path)
    if len(matches) > 1:
        raise AppError(
            "PATH_LOCK_CONFLICT",
            f"path target matches multiple lock records: {safe_text(path, 200)}",
            detail={"lock_ids": [lock.lock_id for lock in matches]},
        )
    return matches[0]


def locks_among(channels: QuerySet[Channel], *, limit: int) -> list[PathLock]:
    """The path locks of ``channels`` (a queryset: the viewer's visible channels), soonest
    expiry first (expired, stale ones lead), with channel and entries: two queries, at most
    ``limit`` locks (the overview's locks held and stale locks)."""
    return list(
        _locks_loaded(PathLock.objects.filter(channel__in=channels)).order_by("expires_at", "pk")[
            :limit
        ]
    )


def lock_fence_last(*, channel: Channel) -> int:
    """The last fence handed out to a lock of the channel (0: none yet)."""
    row = LockFence.objects.filter(channel=channel).values_list("last_fence", flat=True).first()
    return row or 0


def lock_fence_state(*, channel: Channel, path: str, fence: int) -> dict[str, Any]:
    """Whether ``fence`` is current for the lock holding exactly ``path`` (as unlock names a
    lock by path): the answer of ``GET …/locks/fence/`` (``agentchat.core.rules.fence``).
    No lock holding the path: ``expired`` for a fence the channel handed out (its lock ended),
    ``stale`` for one it never did. Raises PATH_LOCK_CONFLICT (several records hold it)."""
    try:
        lock: PathLock | None = lock_find_by_path(channel=channel, path=path)
    except AppError as exc:
        if exc.code != "PATH_LOCK_NOT_FOUND":
            raise
        lock = None
    if lock is None:
        issued = 0 < fence <= lock_fence_last(channel=channel)
        return {
            "path": path,
            "lock_id": None,
            "fence": None,
            "checked": fence,
            "state": "expired" if issued else "stale",
            "owner": None,
            "expires_at": None,
        }
    live = not is_expired(lock.expires_at)
    return {
        "path": path,
        "lock_id": lock.lock_id,
        "fence": lock.fence,
        "checked": fence,
        "state": fence_state(fence, lock.fence, live=live),
        "owner": lock.owner,
        "expires_at": records.lock_time(lock, "expires_at"),
    }
