"""The message folds this process made lately, kept in memory (``FoldCache``), so that a
summary of a channel whose history is big goes on from its fold instead of reading that history
again, or decoding a stored fold of as many megabytes in one call (which holds the interpreter's
lock the whole time: every other request of the process waits for it).

A fold up to seq N is a function of the channel's messages up to N, which never change, so a
kept fold is never stale: it is only behind, and the summary folds what was posted since. Keyed
by the channel's row and its creation time (a row id a rolled-back test reused is another
channel). Bounded: at most ``MAX_CHARS`` characters of message text in all (a decision's
details, a blocker's, a message's evidence), the channels used longest ago dropped first; a fold
bigger than a quarter of that is not kept (one behind it stays). What it hands out is a copy
(its lists; entries are never changed in place), so callers feed and sort theirs freely.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from agentchat.state.messages import MessageFold
from channels_app.models import Channel

MAX_CHARS = 64 * 1024 * 1024


def _chars(fold: MessageFold) -> int:
    return sum(
        len(item.get(name) or "")
        for items, name in (
            (fold.decisions, "details"),
            (fold.blockers, "details"),
            (fold.verification, "evidence"),
        )
        for item in items
    ) + 256 * (len(fold.decisions) + len(fold.blockers) + len(fold.verification))


def _copy(fold: MessageFold) -> MessageFold:
    copied = MessageFold.from_state(fold.state())
    assert copied is not None
    return copied


class FoldCache:
    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.max_chars = max_chars
        self._lock = threading.Lock()
        self._folds: OrderedDict[tuple[Any, ...], tuple[MessageFold, int]] = OrderedDict()
        self._total = 0

    @staticmethod
    def _key(channel: Channel) -> tuple[Any, ...]:
        return (channel.pk, channel.created_at)

    def get(self, channel: Channel) -> MessageFold | None:
        """A copy of the kept fold of ``channel``, or None."""
        with self._lock:
            entry = self._folds.get(self._key(channel))
            if entry is None:
                return None
            self._folds.move_to_end(self._key(channel))
            fold = entry[0]
        return _copy(fold)

    def put(self, channel: Channel, fold: MessageFold) -> None:
        """Keep (a copy of) ``fold`` unless one further along is kept."""
        size = _chars(fold)
        key = self._key(channel)
        with self._lock:
            kept = self._folds.get(key)
            if kept is not None and kept[0].last_seq >= fold.last_seq:
                return
            if size > self.max_chars // 4:
                return  # too big to keep: a kept one behind it still is a start
            if kept is not None:
                self._total -= kept[1]
                del self._folds[key]
            self._folds[key] = (_copy(fold), size)
            self._total += size
            while self._total > self.max_chars:
                _, (_, dropped) = self._folds.popitem(last=False)
                self._total -= dropped

    def clear(self) -> None:
        with self._lock:
            self._folds.clear()
            self._total = 0


FOLDS = FoldCache()
