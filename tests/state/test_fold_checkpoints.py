"""The state summary costs what was posted since the last summary, not the channel's history:
its fold is checkpointed (``agentchat.state.checkpoints``), a summary after N new messages
folds those N, a budget that runs out keeps the progress, and the result is the full fold's."""

from __future__ import annotations

import pytest

from agentchat.core.rules.errors import AppError
from agentchat.models import StateFold
from agentchat.state import checkpoints, selectors
from agentchat.state.markdown import state_markdown
from agentchat.state.messages import MessageFold, message_views
from channels_app import services
from channels_app.models import Channel
from tests.state.scenario import CHANNEL, Scenario

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(checkpoints, "FOLD_CHUNK", 4)
    monkeypatch.setattr(checkpoints, "CHECKPOINT_ROWS", 5)


@pytest.fixture
def fed(monkeypatch):
    """The messages folded (MessageFold.feed calls), by seq."""
    seqs: list[int] = []
    real = MessageFold.feed

    def feed(self, view):
        seqs.append(view.seq)
        return real(self, view)

    monkeypatch.setattr(MessageFold, "feed", feed)
    return seqs


def posts(channel: Channel, count: int, *, start: int = 0) -> None:
    for index in range(start, start + count):
        title = f"Decision: choice {index}" if index % 3 == 0 else f"note {index}"
        services.message_post(channel=channel, sender="alice", title=title, body=f"b{index}")


def test_a_summary_after_n_new_messages_folds_those_n(api_for, small_chunks, fed):
    alice = api_for("alice")
    assert alice.post("/api/v1/channels/", {"name": "big"}, format="json").status_code == 201
    channel = Channel.objects.get(name="big")
    posts(channel, 30)
    first = alice.get("/api/v1/channels/big/state/")
    assert first.status_code == 200, first.content
    assert len(fed) == 30
    assert StateFold.objects.get(channel=channel).last_seq == 30
    posts(channel, 3, start=30)
    fed.clear()
    again = alice.get("/api/v1/channels/big/state/?format=md")
    assert again.status_code == 200
    assert fed == [31, 32, 33]  # not the 30 before them
    # The same bytes as a fold of the whole history.
    StateFold.objects.all().delete()
    assert alice.get("/api/v1/channels/big/state/?format=md").content == again.content


def test_checkpointed_summary_is_the_full_folds(api_for, frozen, small_chunks):
    scenario = Scenario(api_for, frozen)
    scenario.build()
    channel = Channel.objects.get(name=CHANNEL)
    full = selectors.summary_build(
        channel=channel,
        fold=MessageFold().feed_all(message_views(channel)),
        generated_at=frozen(),
    )
    assert StateFold.objects.filter(channel=channel).count() == 0
    summary = selectors.state_summary(channel=channel, now=frozen())
    assert StateFold.objects.get(channel=channel).last_seq > 0  # stored on the way
    resumed = selectors.state_summary(channel=channel, now=frozen())
    assert summary == full == resumed
    assert state_markdown(resumed) == state_markdown(full)


def test_a_budget_that_runs_out_keeps_the_progress(api_for, small_chunks, fed, monkeypatch):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "big"}, format="json")
    channel = Channel.objects.get(name="big")
    posts(channel, 20)
    looks = []

    def budget_check():
        looks.append(1)
        if len(looks) > 3:
            raise AppError("WORK_BUDGET_EXCEEDED", "out")

    monkeypatch.setattr(checkpoints, "budget_check", budget_check)
    r = alice.get("/api/v1/channels/big/state/")
    assert (r.status_code, r.json()["error"]["code"]) == (503, "WORK_BUDGET_EXCEEDED")
    assert StateFold.objects.get(channel=channel).last_seq == 12  # three chunks of four
    monkeypatch.setattr(checkpoints, "budget_check", lambda: None)
    fed.clear()
    assert alice.get("/api/v1/channels/big/state/").status_code == 200
    assert fed == list(range(13, 21))


def test_a_few_new_messages_write_no_checkpoint(api_for, small_chunks, django_assert_num_queries):
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "small"}, format="json")
    channel = Channel.objects.get(name="small")
    posts(channel, 3)
    selectors.state_summary(channel=channel)
    assert not StateFold.objects.exists()


def test_the_fold_loads_each_message_once(api_for, django_assert_max_num_queries):
    # sender_kind is read by the message's file text: a column left out of the fold's query
    # is one more query per message.
    alice = api_for("alice")
    alice.post("/api/v1/channels/", {"name": "kinds"}, format="json")
    channel = Channel.objects.get(name="kinds")
    posts(channel, 25)
    services.message_post(channel=channel, sender="eve", sender_kind="human", title="hi")
    with django_assert_max_num_queries(2):
        views = list(message_views(channel))
    assert len(views) == 26
    assert views[-1].meta.get("sender_kind") == "human"
