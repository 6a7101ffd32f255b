"""The folds a process keeps (agentchat.state.fold_cache): a summary goes on from the kept fold
instead of reading the channel's history again; what is kept is a copy, bounded in size."""

from __future__ import annotations

import pytest

from agentchat.state import checkpoints
from agentchat.state.fold_cache import FOLDS, FoldCache
from agentchat.state.messages import MessageFold
from agentchat.state.selectors import state_summary
from channels_app import services

pytestmark = pytest.mark.django_db


def test_a_summary_goes_on_from_the_kept_fold(monkeypatch):
    from agentchat.core.identity.services import agent_get_or_create

    agent_get_or_create(name="alice")
    channel = services.channel_create(name="room", created_by="alice")
    for n in range(3):
        services.message_post(channel=channel, sender="alice", title=f"Decision: d{n}")
    first = state_summary(channel=channel)
    read: list[int] = []
    real = checkpoints.message_views

    def counted(channel, *, after=0, **kwargs):
        for view in real(channel, after=after, **kwargs):
            read.append(view.seq)
            yield view

    monkeypatch.setattr(checkpoints, "message_views", counted)
    services.message_post(channel=channel, sender="alice", title="Decision: d3")
    channel.refresh_from_db()
    second = state_summary(channel=channel)
    assert read == [4]  # only the message posted since: the history is not read again
    assert [d["title"] for d in second["decisions"]] == ["d0", "d1", "d2", "d3"]
    assert len(first["decisions"]) == 3  # what the first summary got was not changed
    FOLDS.clear()
    read.clear()
    assert state_summary(channel=channel)["decisions"] == second["decisions"]
    assert read == [1, 2, 3, 4]  # nothing kept, no checkpoint (under 200): folded again


def test_the_cache_keeps_copies_within_its_size():
    from types import SimpleNamespace

    cache = FoldCache(max_chars=40_000)
    one, two = SimpleNamespace(pk=1, created_at=1), SimpleNamespace(pk=2, created_at=2)
    fold = MessageFold(last_seq=5, decisions=[{"seq": 5, "details": "x" * 9000}])
    cache.put(one, fold)
    fold.decisions.append({"seq": 6, "details": ""})
    kept = cache.get(one)
    assert kept is not None and len(kept.decisions) == 1  # a copy, not the caller's
    kept.decisions.clear()
    assert len(cache.get(one).decisions) == 1
    cache.put(one, MessageFold(last_seq=4))  # behind the kept one: ignored
    assert cache.get(one).last_seq == 5
    cache.put(one, MessageFold(last_seq=9, decisions=[{"seq": 9, "details": "y" * 20_000}]))
    assert cache.get(one).last_seq == 5  # over a quarter of the cache: not kept, the old one is
    cache.put(two, MessageFold(last_seq=1))
    for n in range(3, 12):
        other = SimpleNamespace(pk=n, created_at=n)
        cache.put(other, MessageFold(last_seq=1, decisions=[{"seq": 1, "details": "z" * 9000}]))
    assert cache.get(one) is None and cache.get(two) is None  # the least recently used went
    assert cache.get(other) is not None and cache._total <= 40_000
