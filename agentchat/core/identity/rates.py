"""The post budget: a token bucket per top-level agent (its sub-agents share it), taken from by
every write that creates a message (``channels_app.services.message_post``: posts, events, the
audit messages of task, lock and channel changes) and by nothing else, reads never.

``AGENTCHAT_POST_RATE`` is ``N/period``: a bucket of N posts that refills at N per period
(``agentchat.core.rules.presence.rate_parse``; empty: no limit). The bucket is a database row
(``RateBucket``) taken from by one conditional UPDATE in the posting transaction, so

- the count holds across threads and processes (every process updates the same row; on
  PostgreSQL the row lock queues an agent's concurrent posts, on SQLite the write lock does);
- a post refused for any reason, the rate included, or rolled back costs nothing (the UPDATE
  rolls back with it), and so does a retry answered with the first message (its savepoint);
- refusing writes nothing: the 429 is decided by a read of the row.

Redis is not used even when configured: a count taken there would not roll back with a post
that fails after it, and the posting transaction writes to the database anyway.
"""

from __future__ import annotations

import functools
import math

from django.conf import settings
from django.db import connection

from agentchat.core.models import RateBucket
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.presence import Rate, namespace_root, rate_parse


@functools.lru_cache(maxsize=8)
def _rate_of(spec: str) -> Rate | None:
    return rate_parse(spec)


def post_rate() -> Rate | None:
    """The configured rate (None: no limit)."""
    return _rate_of(str(settings.AGENTCHAT_POST_RATE or ""))


def _sql(vendor: str) -> tuple[str, str]:
    least, greatest = ("MIN", "MAX") if vendor == "sqlite" else ("LEAST", "GREATEST")
    table = connection.ops.quote_name(RateBucket._meta.db_table)
    # The tokens the bucket holds now: what it held, refilled since its stamp, at most full.
    level = f"{least}(%s, tokens + {greatest}(0, %s - stamp) * %s)"
    take = f"UPDATE {table} SET tokens = {level} - 1, stamp = {greatest}(stamp, %s) "
    take += f"WHERE name = %s AND {level} >= 1"
    fill = f"INSERT INTO {table} (name, tokens, stamp) VALUES (%s, %s, %s) "
    fill += "ON CONFLICT (name) DO NOTHING"
    return take, fill


def rate_take(*, agent: str) -> None:
    """Take one post from the bucket of ``agent``'s top-level agent, in the caller's
    transaction (so a post that fails later gives it back). Raises RATE_LIMITED with
    ``retry_after`` (whole seconds, at least 1) when the bucket is empty."""
    rate = post_rate()
    if rate is None:
        return
    name = namespace_root(agent)
    now = clock.now().timestamp()
    take, fill = _sql(connection.vendor)
    level = [rate.count, now, rate.per_second]
    with connection.cursor() as cursor:
        cursor.execute(take, [*level, now, name, *level])
        if cursor.rowcount == 1:
            return
        # No bucket yet: a full one, less this post (a concurrent first post made it: retry).
        cursor.execute(fill, [name, rate.count - 1, now])
        if cursor.rowcount == 1:
            return
        cursor.execute(take, [*level, now, name, *level])
        if cursor.rowcount == 1:
            return
    bucket = RateBucket.objects.filter(name=name).values_list("tokens", "stamp").first()
    tokens, stamp = bucket if bucket is not None else (0.0, now)
    held = min(rate.count, tokens + max(0.0, now - stamp) * rate.per_second)
    # Rounded first: 5 s into a 6 s refill is 1 s to wait, not 1.0000000002 (2 s).
    retry_after = max(1, math.ceil(round((1 - held) / rate.per_second, 6)))
    raise AppError(
        "RATE_LIMITED",
        f"{name!r} and its sub-agents may post {rate.count} times per {rate.seconds:g} s "
        f"(AGENTCHAT_POST_RATE); retry in {retry_after} s",
        detail={
            "agent": name,
            "limit": rate.count,
            "period_seconds": rate.seconds,
            "retry_after": retry_after,
        },
    )
