"""A channel with something of everything the folder holds, made through the services (the
unit tests of the sync; the interop tests build theirs through the REST API)."""

from __future__ import annotations

from pathlib import Path

from agentchat.core.identity.services import agent_get_or_create
from agentchat.core.models import Agent
from channels_app.models import Channel, Message
from channels_app.services import channel_create, cursor_ack, message_post
from locks_app.models import PathLock
from locks_app.selectors import lock_paths_parse
from locks_app.services import lock_acquire
from tasks_app.services.leases import lease_claim
from tasks_app.services.tasks import task_create
from tests.tasks_app.helpers import FIVE_MINUTES


def agents(*names: str) -> dict[str, Agent]:
    return {name: agent_get_or_create(name=name) for name in names}


def build(name: str = "review") -> Channel:
    people = agents("alice", "bob", "carol")
    channel = channel_create(
        name=name, created_by="alice", topic="Ünïcode topic", members=["alice", "bob"]
    )
    message_post(channel=channel, sender="alice", title="Schema v0.2", body="first\n")
    message_post(
        channel=channel, sender="bob", title="Re: Schema", body="ok", to="alice", reply_to=1
    )
    message_post(
        channel=channel, sender="carol", title="Ünïcödé 日本語 ✓", body="x", to="alice,bob"
    )
    task_create(channel=channel, task_id="T-1", title="first task", created_by="alice")
    task_create(
        channel=channel, task_id="T-2", title="second", created_by="alice", depends_on=["T-1"]
    )
    lease_claim(channel=channel, task_id="T-1", actor="bob", duration=FIVE_MINUTES)
    lock_acquire(channel=channel, owner="carol", paths=lock_paths_parse(["src/a.py"]))
    cursor_ack(channel=channel, agent=people["bob"], seq=2)
    return channel


def post(channel: Channel, count: int, sender: str = "alice") -> list[Message]:
    return [
        message_post(channel=channel, sender=sender, title=f"note {i}", body=f"body {i}")[0]
        for i in range(count)
    ]


def tree(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the sync's own state excluded) and its bytes."""
    return {
        str(path.relative_to(root)): path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file() and ".agentchat-sync" not in path.parts and ".git" not in path.parts
    }


def lock_ids(channel: Channel) -> list[str]:
    return list(PathLock.objects.filter(channel=channel).values_list("lock_id", flat=True))
