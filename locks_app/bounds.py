"""What one agent, and one channel, may hold in lock entries, and how much of what is held a
conflict answer lists: whatever is held, a request's work is bounded by the caps and its
answer by ``CONFLICTS_SHOWN``.

Every held entry can be a candidate of a later request (``locks_app.conflicts``), and every
lock overlapping a request used to be listed in its 409 or its check answer, paths and all: an
agent holding thousands of paths made each answer to every other agent megabytes. So the
entries (paths) are capped like the patterns starting with a wildcard are
(``caps_check``): per agent counting its expired locks too (they still conflict,
and their owner may unlock them at any time), per channel counting unexpired locks only (locks
left by agents gone away refuse no one). A conflict answer lists the first ``CONFLICTS_SHOWN``
overlapping locks by lock id and, when there are more, says how many in all
(``conflicts_total``) and ``"truncated": true``; a small answer is the reference's as it was.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Prefetch, Q, QuerySet

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.presence import namespace_root
from channels_app.models import Channel
from locks_app import records
from locks_app.models import PathLock, PathLockEntry
from locks_app.paths import WORKSPACE, PathEntry, anchor_key, index_key

CONFLICTS_SHOWN = 50  # overlapping locks listed in a 409 or a check answer


def cap_refusal(
    code: str, held: int, wanted: int, limit: int, *, scope: str, what: str, hint: str
) -> AppError:
    """A lock refused by one of the caps on what is held (``scope`` agent or channel): at most
    ``limit`` ``what``, ``held`` held, ``wanted`` more asked; ``hint`` says what to do."""
    where = "an agent may hold in a channel" if scope == "agent" else "the channel may hold"
    return AppError(
        code,
        f"{where} at most {limit} {what}; {held} are held"
        + (" by you (expired ones too: unlock them)" if scope == "agent" else "")
        + f": {hint}",
        detail={"held": held, "requested": wanted, "limit": limit, "scope": scope},
    )


def held_caps_check(
    held: QuerySet[PathLockEntry],
    wanted: int,
    *,
    owner: str,
    now: datetime,
    exclude_lock_pk: int | None,
    per_agent: int,
    per_channel: int,
    refusal: Callable[..., AppError],
) -> None:
    """The two caps on the ``held`` entries of a channel (the module's): ``owner``'s namespace's
    (its root and every sub-agent of it, which act with the root's tokens), its expired locks
    too, at most ``per_agent``; the channel's unexpired ones at most
    ``per_channel``; ``wanted`` more included. ``exclude_lock_pk``: the lock being recovered.
    Raises ``refusal(held, wanted, limit, scope=...)``."""
    if exclude_lock_pk is not None:
        held = held.exclude(lock_id=exclude_lock_pk)
    root = namespace_root(owner)  # a parent and its sub-agents (AgentChat-As) share one cap
    mine = held.filter(Q(lock__owner=root) | Q(lock__owner__startswith=root + ".")).count()
    if mine + wanted > per_agent:
        raise refusal(mine, wanted, per_agent, scope="agent")
    active = held.filter(lock__expires_at__gt=now).count()
    if active + wanted > per_channel:
        raise refusal(active, wanted, per_channel, scope="channel")


# The caps' refusals: cap_refusal with each cap's code, what it counts and what to do.
too_many_paths = functools.partial(
    cap_refusal,
    "PATH_LOCK_TOO_MANY_PATHS",
    what="locked paths",
    hint="unlock some, or lock a folder or a pattern instead of its files",
)
too_many_patterns = functools.partial(
    cap_refusal,
    "PATH_LOCK_TOO_MANY_PATTERNS",
    what="paths starting with a wildcard",
    hint="unlock some, or lock patterns with a literal prefix (src/**/*.md)",
)


def root_count(entries: Sequence[PathEntry]) -> int:
    """How many of ``entries`` are anchored at the workspace (``.``, ``*.md``, ``**/x``)."""
    return sum(anchor_key(entry.normalized_path) == WORKSPACE for entry in entries)


def caps_check(
    channel: Channel,
    entries: Sequence[PathEntry],
    *,
    owner: str,
    now: datetime,
    exclude_lock_pk: int | None = None,
) -> None:
    """The caps on what a new (or recovered) lock's ``entries`` would make held, each twice
    (``held_caps_check``), counted inside the write transaction; ``exclude_lock_pk``: the lock
    being recovered.

    - The entries anchored at the workspace: each is a candidate of every later request of
      the channel, and comparing them is work those requests do (``locks_app.conflicts``):
      AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS_PER_AGENT and _MAX_ROOT_PATTERNS, counted
      through the key's index. Held entries then number at most the channel's cap plus each
      agent's. Raises PATH_LOCK_TOO_MANY_PATTERNS.
    - All entries: AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT and _MAX_PATHS. Raises
      PATH_LOCK_TOO_MANY_PATHS."""
    # (held, wanted, per agent, per channel, refusal), checked in this order.
    checks = [
        (
            PathLockEntry.objects.filter(channel_id=channel.pk),
            len(entries),
            settings.AGENTCHAT_PATH_LOCK_MAX_PATHS_PER_AGENT,
            settings.AGENTCHAT_PATH_LOCK_MAX_PATHS,
            too_many_paths,
        )
    ]
    if roots := root_count(entries):
        roots_check = (
            PathLockEntry.objects.filter(index_key=index_key(channel.pk, WORKSPACE)),
            roots,
            settings.AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS_PER_AGENT,
            settings.AGENTCHAT_PATH_LOCK_MAX_ROOT_PATTERNS,
            too_many_patterns,
        )
        checks.insert(0, roots_check)
    for held, wanted, per_agent, per_channel, refusal in checks:
        held_caps_check(
            held,
            wanted,
            owner=owner,
            now=now,
            exclude_lock_pk=exclude_lock_pk,
            per_agent=per_agent,
            per_channel=per_channel,
            refusal=refusal,
        )


def conflicts_listed(pks: Collection[int], now: datetime) -> tuple[list[dict[str, Any]], bool]:
    """The conflict records of the first CONFLICTS_SHOWN of the locks ``pks`` by lock id (only
    those are loaded), and whether any of all of them has expired."""
    shown = (
        PathLock.objects.filter(pk__in=list(pks))
        .select_related("channel")
        .prefetch_related(Prefetch("entries", queryset=PathLockEntry.objects.order_by("position")))
        .order_by("lock_id")[:CONFLICTS_SHOWN]
    )
    listed = [records.lock_conflict_to_dict(lock, now) for lock in shown]
    expired = any(item["expired"] for item in listed)
    if not expired and len(pks) > len(listed):
        expired = PathLock.objects.filter(pk__in=list(pks), expires_at__lte=now).exists()
    return listed, expired


def conflicts_body(listed: list[dict[str, Any]], total: int) -> dict[str, Any]:
    """``{"conflicts": [...]}``, plus ``conflicts_total`` and ``"truncated": true`` when
    ``listed`` is not all ``total`` of them."""
    body: dict[str, Any] = {"conflicts": listed}
    if total > len(listed):
        body.update(conflicts_total=total, truncated=True)
    return body
