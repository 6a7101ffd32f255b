"""The message fold kept up to date, so that a summary costs what was posted since the last
one, not the channel's history.

A summary goes on from the latest of two folds: the channel's checkpoint (``StateFold``, one row
per channel, left by earlier summaries) and its latest compaction's. The messages after it are
folded ``FOLD_CHUNK`` at a time, the work budget (``agentchat.core.db.heavy.budget_check``)
looked at before each chunk; once ``CHECKPOINT_ROWS`` or more were folded the fold is stored
again, after each chunk of a long history too, and when the budget runs out, so that a request
stopped by its budget (WORK_BUDGET_EXCEEDED) has kept its progress and the next one goes on
from there (a statement the database aborted loses at most the chunk it was loading). A summary of a
channel with a few new messages writes nothing.
"""

from __future__ import annotations

from django.db import IntegrityError

from agentchat.core.db.heavy import budget_check, budget_paused
from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules.errors import AppError
from agentchat.models import StateFold, StateSnapshot
from agentchat.state.messages import MessageFold, message_views
from channels_app.models import Channel

FOLD_CHUNK = 500  # messages folded between two looks at the budget
CHECKPOINT_ROWS = 200  # messages folded since the stored fold that make it worth storing again


def _stored(model: type[StateFold] | type[StateSnapshot], channel: Channel) -> MessageFold | None:
    if model is StateSnapshot:
        state = (
            StateSnapshot.objects.filter(channel=channel)
            .order_by("-id")
            .values_list("fold", flat=True)
            .first()
        )
    else:
        state = StateFold.objects.filter(channel=channel).values_list("fold", flat=True).first()
    return MessageFold.from_state(state)


def fold_resumed(channel: Channel) -> MessageFold:
    """The furthest stored fold of the channel (its checkpoint or its latest compaction's), to
    go on from (messages are immutable), or an empty one."""
    folds = [
        fold
        for fold in (_stored(StateFold, channel), _stored(StateSnapshot, channel))
        if fold is not None
    ]
    return max(folds, key=lambda fold: fold.last_seq, default=None) or MessageFold()


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
            return fold, folded
