"""A channel written as the reference CLI's folder, for interop tests: the smallest writer that
the reference reads (``_meta.json``, every message file, ``tasks/``, ``claims/``, ``locks/``,
``.cursors/`` and the two empty lock files), from the render and record functions the sync
uses. Not the sync: no state.md, no incremental or atomic writes."""

from __future__ import annotations

from pathlib import Path

from agentchat.folder import render
from channels_app.models import Channel, Cursor, Message
from locks_app.records import lock_file_bytes, lock_file_name, lock_to_dict
from locks_app.selectors import lock_list
from tasks_app import records as task_records
from tasks_app import selectors as task_selectors


def _write(folder: Path, relative: str, data: bytes) -> None:
    path = folder / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def write_channel(root: Path, channel: Channel) -> Path:
    """Write ``channel`` under ``root``; returns its folder."""
    folder = root / channel.name
    folder.mkdir(parents=True)
    _write(folder, render.META_FILE, render.meta_bytes(channel))
    (folder / render.CURSORS_DIR).mkdir()
    for name in render.LOCK_FILES:
        _write(folder, name, b"")
    for message in Message.objects.filter(channel=channel).order_by("seq").iterator():
        _write(
            folder,
            render.message_name(message),
            render.message_bytes(message, channel=channel.name),
        )
    for task in task_selectors.task_list(channel=channel):
        record = task_selectors.task_record(task)
        _write(folder, task_records.task_path(record), task_records.record_text(record).encode())
        lease = task_selectors.task_lease(task)
        if lease is not None:
            claim = task_selectors.lease_record(lease)
            _write(folder, task_records.lease_path(claim), task_records.record_text(claim).encode())
    for lock in lock_list(channel=channel):
        record = lock_to_dict(lock)
        _write(folder, lock_file_name(record), lock_file_bytes(record))
    cursors = Cursor.objects.filter(channel=channel).values_list("agent__name", "seq")
    for name, data in render.cursor_files(cursors).items():
        _write(folder, name, data)
    return folder
