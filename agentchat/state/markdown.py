"""The state summary as markdown, byte for byte what the reference CLI prints for ``agent-chat
state CH`` and writes as ``state.md`` (REFERENCE-CLI §3.14): seven sections after the title,
each followed by one empty line, ``*(none)*`` for an empty one, one final newline. Pure: a
function of the summary object (``agentchat.state.summary``); each list is sorted again as the
reference sorts it, so a summary read back from storage renders the same.

Kept quirks: a blocker's details are written inline, so a multi-line body breaks its bullet; a
topic of only spaces shows as nothing, not ``(none)``; bodies are split into lines as
``str.splitlines`` splits them (form feeds and U+2028 included).
"""

from __future__ import annotations

from typing import Any

NONE = "*(none)*"


def _joined(values: list[str], *, sort: bool) -> str:
    return ", ".join(sorted(values) if sort else values) if values else "none"


def _goal(summary: dict[str, Any]) -> list[str]:
    topic = summary["topic"].strip() if summary["topic"] else "(none)"
    members = ", ".join(sorted(summary["members"])) if summary["members"] else "(none)"
    return [
        "## Goal & Topic",
        f"- **Channel**: {summary['channel']}",
        f"- **Topic**: {topic}",
        f"- **Members**: {members}",
        f"- **Last Message Sequence**: #{summary['last_seq']:04d}",
    ]


def _decisions(summary: dict[str, Any]) -> list[str]:
    lines = []
    for item in sorted(summary["decisions"], key=lambda item: item["seq"]):
        lines.append(
            f"- `[#{item['seq']:04d}]` **{item['title']}** "
            f"(by `{item['author']}` at `{item['time']}`):"
        )
        details = item["details"].strip()
        if details:
            lines += [f"  {line}" for line in details.splitlines()]
        else:
            lines.append("  *(no additional details)*")
    return lines


def _open_tasks(summary: dict[str, Any]) -> list[str]:
    lines = []
    for task in sorted(summary["open_tasks"], key=lambda task: task["id"]):
        lines += [
            f"- `[{task['id']}]` **{task['title']}** (`{task['status']}`)",
            f"  - **Owner**: `{task['owner'] or 'unassigned'}`",
            f"  - **Lease**: `{task['lease_expires_at'] or 'none'}`",
            f"  - **Depends on**: `{_joined(task['depends_on'], sort=True)}`",
            f"  - **Files hint**: `{_joined(task['files_hint'], sort=True)}`",
            f"  - **Acceptance**: `{_joined(task['acceptance'], sort=False)}`",
        ]
    return lines


def _blockers(summary: dict[str, Any]) -> list[str]:
    lines = []
    for item in sorted(summary["blockers"], key=lambda item: (item["kind"], item["source_id"])):
        by = f" (by `{item['author']}`)" if item["author"] else ""
        lines.append(f"- `[{item['source_id']}]` **{item['title']}**{by}: {item['details']}")
    return lines


def _owners(summary: dict[str, Any]) -> list[str]:
    lines = []
    for name in sorted(summary["owners"]):
        assignment = summary["owners"][name]
        lines.append(f"- **{name}**:")
        for task in sorted(assignment["tasks"], key=lambda task: task["id"]):
            lease = task["lease_expires_at"]
            expires = f", lease expires: `{lease}`" if lease else ""
            lines.append(
                f"  - Task `{task['id']}` (**{task['title']}**, status: `{task['status']}`"
                f"{expires})"
            )
        for lock in sorted(assignment["path_locks"], key=lambda lock: lock["lock_id"]):
            paths = ", ".join(sorted(lock["paths"]))
            lines.append(
                f"  - Path Lock `{lock['lock_id']}` (`{paths}`, expires: `{lock['expires_at']}`)"
            )
    return lines


def _path_locks(summary: dict[str, Any]) -> list[str]:
    lines = []
    for lock in sorted(summary["path_locks"], key=lambda lock: lock["lock_id"]):
        paths = ", ".join(sorted(entry["normalized_path"] for entry in lock["paths"]))
        lines.append(
            f"- `[{lock['lock_id']}]` `{paths}` "
            f"(owner: `{lock['owner']}`, expires: `{lock['expires_at']}`)"
        )
    return lines


def _verification(summary: dict[str, Any]) -> list[str]:
    lines = []
    for item in sorted(summary["verification"], key=lambda item: (item["time"], item["source_id"])):
        evidence = item["evidence"].strip()
        if item["source_type"] == "message":
            lines.append(
                f"- `[#{int(item['source_id']):04d}]` **{item['title']}** "
                f"(by `{item['author']}` at `{item['time']}`):"
            )
        else:
            lines.append(
                f"- `[{item['source_id']}]` **{item['title']}** "
                f"(verified by `{item['author']}` at `{item['time']}`):"
            )
            if item["acceptance"]:
                lines.append(f"  - Acceptance criteria: {', '.join(item['acceptance'])}")
        if evidence:
            lines += [f"  > {line}" for line in evidence.splitlines()]
    return lines


SECTIONS = (
    ("## Decisions", _decisions),
    ("## Open Tasks", _open_tasks),
    ("## Blockers", _blockers),
    ("## Owners & Leases", _owners),
    ("## Path Locks", _path_locks),
    ("## Verification Evidence", _verification),
)


def state_markdown(summary: dict[str, Any]) -> str:
    """The markdown of a summary object."""
    lines = [f"# State: {summary['channel']}", "", *_goal(summary), ""]
    for heading, section in SECTIONS:
        body = section(summary)
        lines += [heading, *(body or [NONE]), ""]
    return "\n".join(lines)
