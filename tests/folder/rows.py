"""A channel's files rendered from its rows with the folder's renderers (``agentchat.folder``,
the tasks and locks records): what a sync writes, for the import's round-trip tests."""

from __future__ import annotations

from agentchat.folder import render
from channels_app.models import Channel, Cursor, Message
from locks_app import selectors as lock_selectors
from locks_app.records import lock_file_bytes, lock_file_name, lock_to_dict
from tasks_app import selectors as task_selectors
from tasks_app.models import Lease, Task
from tasks_app.records import lease_path, record_text, task_path


def channel_files(channel: Channel) -> dict[str, bytes]:
    """``{path inside the channel folder: bytes}`` for every file the renderers make."""
    out: dict[str, bytes] = {render.META_FILE: render.meta_bytes(channel)}
    for message in Message.objects.filter(channel=channel).order_by("seq").iterator(500):
        message.channel = channel
        out[render.message_name(message)] = render.message_bytes(message, channel=channel.name)
    cursors = Cursor.objects.filter(channel=channel).values_list("agent__name", "seq")
    out.update(render.cursor_files(cursors))
    for task in Task.objects.filter(channel=channel).select_related("channel"):
        record = task_selectors.task_record(task)
        out[task_path(record)] = record_text(record).encode("utf-8")
    for lease in Lease.objects.filter(task__channel=channel).select_related("task__channel"):
        record = task_selectors.lease_record(lease)
        out[lease_path(record)] = record_text(record).encode("utf-8")
    for lock in lock_selectors.lock_list(channel=channel):
        record = lock_to_dict(lock)
        out[lock_file_name(record)] = lock_file_bytes(record)
    return out
