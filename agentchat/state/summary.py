"""The state summary of a channel as a JSON object with the reference's keys
(``agent-chat state --json``, REFERENCE-CLI §3.14), from the message fold
(``agentchat.state.messages``), the task records with their leases and the lock records.

Keys: ``channel, topic, members, created_at, last_seq, generated_at, decisions, open_tasks,
blockers, owners, path_locks, verification``; each list in the reference's order (decisions by
seq, open tasks by id, blockers by (kind, source_id), locks by id, verification by
(time, source_id), strings compared as strings), so the same data gives the same object.

Deliberate differences from the reference's JSON: ``created_at`` is the channel's creation
time (the reference reads a ``created_at`` key that its own ``_meta.json`` never has, so it is
always ``""`` there); ``generated_at`` is now in UTC (the reference: local time).

Sources a server holds are valid records by construction (the services judge every task and
lock by the reference's record rules), so the reference's lenient fallbacks (skip a bad task
file, drop every lock when one is bad) never apply; strict mode fails only where the message
fold says (``messages.MessageFold``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from agentchat.core.rules.records import ts_seconds
from agentchat.state.messages import MessageFold
from channels_app.models import Channel
from channels_app.records import channel_created
from locks_app import records as lock_records
from locks_app import selectors as lock_selectors
from tasks_app import selectors as task_selectors

OPEN_STATUSES = frozenset({"open", "in_progress", "blocked"})


def _task_part(
    tasks: Iterable[dict[str, Any]], completion_actors: dict[str, str]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """(open task records, task blockers, done-task verification), walking the tasks once."""
    open_tasks: list[dict[str, Any]] = []
    blockers: list[dict[str, Any]] = []
    verification: list[dict[str, Any]] = []
    status_of: dict[str, str] = {}
    with_dependencies: list[tuple[str, str, str, list[str]]] = []
    for record in tasks:
        task_id, status, title = record["id"], record["status"], record["title"]
        author = record["owner"] or record["created_by"]
        status_of[task_id] = status
        if status in OPEN_STATUSES:
            open_tasks.append(record)
        if status == "blocked":
            blockers.append(
                {
                    "kind": "task_status",
                    "source_id": task_id,
                    "title": f"Task {task_id} blocked ({title})",
                    "details": "Task is marked with status 'blocked'",
                    "author": author,
                    "time": record["updated_at"],
                    "blocking_items": [],
                }
            )
        if record["depends_on"]:
            with_dependencies.append((task_id, author, record["updated_at"], record["depends_on"]))
        if status == "done":
            verification.append(
                {
                    "source_type": "task",
                    "source_id": task_id,
                    "author": completion_actors.get(task_id, author),
                    "time": record["updated_at"],
                    "title": f"Task {task_id} completed: {title}",
                    "evidence": f"Completed task criteria satisfied for {task_id}.",
                    "acceptance": list(record["acceptance"]),
                }
            )
    # Any task, whatever its status, with a dependency that is not done.
    for task_id, author, updated_at, depends_on in with_dependencies:
        unfinished = [dep for dep in depends_on if status_of.get(dep) != "done"]
        if not unfinished:
            continue
        statuses = ", ".join(
            f"{dep} (status: {status_of.get(dep, 'unknown')})" for dep in unfinished
        )
        blockers.append(
            {
                "kind": "task_dependency",
                "source_id": task_id,
                "title": f"Task {task_id} blocked on dependencies: {', '.join(unfinished)}",
                "details": f"Unfinished dependencies: {statuses}",
                "author": author,
                "time": updated_at,
                "blocking_items": unfinished,
            }
        )
    return open_tasks, blockers, verification


def _owners(
    open_tasks: list[dict[str, Any]], locks: list[dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    owners: dict[str, dict[str, Any]] = {}

    def of(name: str) -> dict[str, Any]:
        return owners.setdefault(name, {"owner": name, "tasks": [], "path_locks": []})

    for task in open_tasks:
        if task["owner"]:
            of(task["owner"])["tasks"].append(
                {
                    "id": task["id"],
                    "title": task["title"],
                    "status": task["status"],
                    "lease_expires_at": task["lease_expires_at"],
                }
            )
    for lock in locks:
        if lock["owner"]:
            of(lock["owner"])["path_locks"].append(
                {
                    "lock_id": lock["lock_id"],
                    "paths": [entry["normalized_path"] for entry in lock["paths"]],
                    "expires_at": lock["expires_at"],
                }
            )
    for assignment in owners.values():
        assignment["tasks"].sort(key=lambda item: item["id"])
        assignment["path_locks"].sort(key=lambda item: item["lock_id"])
    return dict(sorted(owners.items()))


def summary_of(
    *,
    channel: str,
    topic: str,
    members: Iterable[Any],
    created_at: str,
    fold: MessageFold,
    tasks: Iterable[dict[str, Any]],
    locks: Iterable[dict[str, Any]],
    generated_at: str,
) -> dict[str, Any]:
    """The summary from the channel's meta, its folded messages, its task records (with their
    leases' expiry) and its lock records, in any order. Pure."""
    open_tasks, task_blockers, task_verification = _task_part(tasks, fold.completion_actors)
    locks = list(locks)
    names = [str(name).strip() for name in members if str(name).strip()]
    return {
        "channel": channel,
        "topic": topic,
        "members": sorted(names),
        "created_at": created_at,
        "last_seq": fold.last_seq,
        "generated_at": generated_at,
        "decisions": sorted(fold.decisions, key=lambda item: item["seq"]),
        "open_tasks": sorted(open_tasks, key=lambda item: item["id"]),
        "blockers": sorted(
            task_blockers + fold.blockers, key=lambda item: (item["kind"], item["source_id"])
        ),
        "owners": _owners(open_tasks, locks),
        "path_locks": sorted(locks, key=lambda item: item["lock_id"]),
        "verification": sorted(
            fold.verification + task_verification,
            key=lambda item: (item["time"], item["source_id"]),
        ),
    }


def summary_build(*, channel: Channel, fold: MessageFold, generated_at: datetime) -> dict[str, Any]:
    """The summary of ``channel`` from its folded messages and its current tasks (walked in
    chunks) and locks."""
    return summary_of(
        channel=channel.name,
        topic=channel.topic or "",
        members=channel.members,
        created_at=channel_created(channel) or "",
        fold=fold,
        tasks=(
            task_selectors.task_record(task) for task in task_selectors.tasks_iter(channel=channel)
        ),
        locks=(
            lock_records.lock_to_dict(lock) for lock in lock_selectors.lock_list(channel=channel)
        ),
        generated_at=ts_seconds(generated_at),
    )


def summary_counts(summary: dict[str, Any]) -> dict[str, int]:
    """The counts a ``state.compacted`` audit carries."""
    return {
        "blockers_count": len(summary["blockers"]),
        "decisions_count": len(summary["decisions"]),
        "open_tasks_count": len(summary["open_tasks"]),
        "path_locks_count": len(summary["path_locks"]),
    }
