"""The message fold kept up to date, so that a summary costs what was posted since the last
one, not the channel's history.

A summary goes on from the latest of two folds: the channel's checkpoint (``StateFold``, one row
per channel, left by earlier summaries) and its latest compaction's. The messages after it are
folded ``FOLD_CHUNK`` at a time, the work budget (``agentchat.core.db.heavy.budget_check``)
looked at before each chunk; once ``CHECKPOINT_ROWS`` or more were folded the fold is stored
again, after each chunk of a long history too, and when the budget runs out, so that a request
stopped by its budget (WORK_BUDGET_EXCEEDED) has kept its progress and the next one goes on
from there (a statement the database aborted loses at most the chunk it was loading). A summary of a
channel with a few new messages writes nothing. The process also keeps the folds it made
(``agentchat.state.fold_cache``): the next summary goes on from the furthest of the three, and
reads a stored fold only when it is further than the kept one.
"""

from __future__ import annotations

from typing import Any

from django.db import IntegrityError

from agentchat.core.db.heavy import budget_check, budget_paused
from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules.errors import AppError
from agentchat.models import StateFold, StateSnapshot
from agentchat.state.fold_cache import FOLDS
from agentchat.state.messages import MessageFold, message_views
from channels_app.models import Channel

FOLD_CHUNK = 500  # messages folded between two looks at the budget
CHECKPOINT_ROWS = 200  # messages folded since the stored fold that make it worth storing again


def _stored(channel: Channel) -> list[tuple[int, Any]]:
    """(last_seq, a queryset of its fold) of the channel's checkpoint and latest compaction."""
    found = []
    snapshot = StateSnapshot.objects.filter(channel=channel).order_by("-id")[:1]
    checkpoint = StateFold.objects.filter(channel=channel)
    for rows in (checkpoint, snapshot):
        last_seq = rows.values_list("last_seq", flat=True).first()
        if last_seq is not None:
            found.append((last_seq, rows))
    return found


def fold_resumed(channel: Channel) -> MessageFold:
    """The furthest fold of the channel to go on from (messages are immutable): the one this
    process keeps (``fold_cache``), else its checkpoint or its latest compaction's (only the
    further one is read), or an empty one."""
    kept = FOLDS.get(channel)
    stored = sorted(_stored(channel), key=lambda item: item[0], reverse=True)
    further = not stored or (kept is not None and kept.last_seq >= stored[0][0])
    if kept is not None and kept.last_seq <= channel.last_seq and further:
        return kept
    for _, rows in stored:
        fold = MessageFold.from_state(rows.values_list("fold", flat=True).first())
        if fold is not None:
            return fold
    return MessageFold()


@write_atomic()
def checkpoint_store(channel: Channel, fold: MessageFold) -> None:
    """Store ``fold`` as the channel's checkpoint unless a further one is stored already (two
    summaries may fold at once: the further fold wins, either is right)."""
    state = fold.state()
    if StateFold.objects.filter(channel=channel, last_seq__lt=fold.last_seq).update(
        last_seq=fold.last_seq, fold=state
    ):
        return
    if StateFold.objects.filter(channel=channel).exists():
        return
    try:
        with write_atomic():
            StateFold.objects.create(channel=channel, last_seq=fold.last_seq, fold=state)
    except IntegrityError:
        pass  # another summary stored its own meanwhile


def fold_caught_up(channel: Channel) -> tuple[MessageFold, int]:
    """The fold of the channel's messages up to (about) now, and how many messages this call
    folded. Raises WORK_BUDGET_EXCEEDED (in a heavy request), its progress stored."""
    fold = fold_resumed(channel)
    folded = unsaved = 0
    while True:
        try:
            budget_check()
        except AppError:
            if unsaved:
                with budget_paused():
                    checkpoint_store(channel, fold)
            raise
        before = folded
        for view in message_views(channel, after=fold.last_seq, limit=FOLD_CHUNK):
            fold.feed(view)
            folded += 1
        unsaved += folded - before
        done = folded - before < FOLD_CHUNK
        if unsaved >= CHECKPOINT_ROWS:
            checkpoint_store(channel, fold)
            unsaved = 0
        if done:
            FOLDS.put(channel, fold)
            return fold, folded
