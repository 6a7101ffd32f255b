"""The folder import: a folder the reference CLI wrote, loaded into the database all or
nothing (``folder_import``).

First every file is read and judged outside any transaction (``importer.folder_plan``), so a
malformed folder is refused before anything is written and a running server's writers never
wait on the reading. Then one write transaction (``write_atomic``: on SQLite behind the
process's FIFO writer, as every service's) creates each channel and its rows through the apps'
import services, reading the message files a second time, in batches, so that a channel is
never held in memory; a file that changed since the first pass refuses the import there and
the transaction rolls back.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from agentchat.core.db.transactions import write_atomic
from agentchat.core.rules.errors import AppError
from agentchat.folder import importer
from channels_app.selectors import channel_name_taken
from channels_app.services import (
    channel_import,
    cursors_import,
    markers_import,
    messages_import,
    presence_import,
)
from locks_app.services import lock_fences_restore, locks_import
from tasks_app.services import task_fences_restore, tasks_import


@dataclass(frozen=True)
class ChannelImported:
    name: str
    messages: int
    tasks: int
    leases: int
    locks: int
    cursors: int
    markers: int

    def summary(self) -> str:
        return (
            f"imported {self.name}: {self.messages} messages, {self.tasks} tasks, "
            f"{self.leases} leases, {self.locks} locks, {self.cursors} cursors, "
            f"{self.markers} claimed markers"
        )


def _exists_check(plans: list[importer.ChannelPlan]) -> None:
    names = {plan.name.lower(): plan.name for plan in plans}
    taken = channel_name_taken(names)
    if taken is not None:
        name = names[taken]
        raise AppError(
            "CHANNEL_EXISTS",
            f"{name}: channel {name!r} already exists (nothing was imported)",
            detail={"file": name, "name": name},
        )


def folder_import(*, root: Path, channel: str | None = None) -> list[ChannelImported]:
    """Import every channel folder under ``root`` (or only ``channel``), all or nothing: any
    malformed file, or a channel that exists already, refuses the whole import and writes
    nothing. Raises the codes of ``agentchat.folder.importer`` (each naming its file),
    CHANNEL_EXISTS, ID_CONFLICT, IMPORT_FOLDER_CHANGED."""
    plans = importer.folder_plan(root, channel=channel)
    _exists_check(plans)  # early, as a courtesy: channel_import decides inside the transaction
    done: list[ChannelImported] = []
    with write_atomic():
        for plan in plans:
            meta = plan.meta
            try:
                row = channel_import(
                    name=plan.name,
                    topic=meta.topic,
                    members=meta.members,
                    visibility=meta.visibility,
                    created_at=meta.created_at,
                    created_text=meta.created_text,
                    last_seq=plan.last_seq,
                )
            except AppError as exc:
                raise importer.in_file(plan.name, exc) from None
            count = messages_import(channel=row, messages=importer.messages_stream(root, plan))
            presence_import(channel=row, rows=plan.presence.values())
            cursors_import(channel=row, cursors=plan.cursors)
            markers_import(channel=row, claims=plan.markers)
            tasks_import(channel=row, tasks=plan.tasks, leases=plan.leases)
            task_fences_restore(channel=row, fences=plan.fences.tasks)
            locks_import(channel=row, locks=plan.locks, fences=plan.fences.locks)
            lock_fences_restore(channel=row, last=plan.fences.lock_fence)
            done.append(
                ChannelImported(
                    name=plan.name,
                    messages=count,
                    tasks=len(plan.tasks),
                    leases=len(plan.leases),
                    locks=len(plan.locks),
                    cursors=len(plan.cursors),
                    markers=len(plan.markers),
                )
            )
    return done
