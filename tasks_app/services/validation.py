"""Value checks of tasks and leases: the reference's record rules (REFERENCE-CLI §3.7-3.8),
each failure with the field's stable TASK_* / LEASE_* code, on top of the floor's text rules
(``agentchat.core.rules.validation.text_check``).

Every text of a task refuses lone surrogates and NUL (no stored string may hold them); the
one-line fields (title, branch, acceptance items, the recovery reason) also refuse every line
separator and C0/C1 control character (VT, FF, NEL, U+2028/2029, ESC…), where the reference
refuses only CR, LF and NUL: agents print these fields in their terminals. Ids and owners
follow the name rules (whole-string matches, so ``alice\\n`` is no owner).

Work per request is bounded: each list holds at most ``LIST_MAX`` items, each string at most
the field size (FIELD_TOO_LARGE), and every check is linear in its input.

Pure: nothing here reads the database, so the folder import can judge a
record with the same rules before it writes anything.
"""

from __future__ import annotations

import ntpath
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Any, NoReturn

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name
from agentchat.core.rules.parsed import Parsed
from agentchat.core.rules.paths import safe_text, workspace_path_normalize
from agentchat.core.rules.records import duration_parse, expiry_add
from agentchat.core.rules.validation import reason_check as core_reason_check
from agentchat.core.rules.validation import text_check
from tasks_app import selectors

# What a lease lasts when the request names no duration (the boundary's default, judged like
# a given one).
DEFAULT_LEASE_SECONDS = 300
# Reserved: ``POST …/tasks/recover-pending/`` is routed before ``…/tasks/<id>/``.
RESERVED_TASK_IDS = frozenset({"recover-pending"})
# Items of depends_on, files_hint or acceptance. The reference has no limit; a bound keeps
# one request's checks (and every later listing of the task) small.
LIST_MAX = 1000


# --- durations -----------------------------------------------------------------------------------


def lease_duration_check(value: object) -> timedelta:
    """A request's ``lease_seconds``. Raises LEASE_INVALID_DURATION unless it is a JSON number
    (not a bool), finite, at least 1 ms and at most AGENTCHAT_MAX_LEASE_SECONDS
    (``agentchat.core.rules.records.duration_parse``)."""
    return duration_parse(value, code="LEASE_INVALID_DURATION")


def lease_duration_parse(value: object) -> Parsed[timedelta]:
    """``lease_duration_check`` at the boundary, its refusal kept for the lease service to raise
    after the state checks (the reference's order: LEASE_CONFLICT before a bad duration)."""
    return Parsed.of(lease_duration_check, value)


def lease_expiry(now: datetime, duration: timedelta) -> datetime:
    """``now`` (precise) + ``duration``. Raises LEASE_INVALID_DURATION when the expiry is past
    the calendar's end (a maximum set that high: ``agentchat.core.rules.records.expiry_add``)."""
    return expiry_add(now, duration, code="LEASE_INVALID_DURATION")


# --- values --------------------------------------------------------------------------------------


def line_check(value: object, field: str, code: str, *, allow_empty: bool = False) -> str:
    """One line of text (see the module docstring). Raises ``code``, FIELD_TOO_LARGE."""
    return text_check(value, field=field, code=code, single_line=True, allow_empty=allow_empty)


def _list_check(value: object, field: str, code: str) -> list[Any]:
    if not isinstance(value, list):
        raise AppError(code, f"{field} must be a JSON array", detail={"field": field})
    if len(value) > LIST_MAX:
        raise AppError(
            code,
            f"{field} has more than {LIST_MAX} items",
            detail={"field": field, "max_items": LIST_MAX},
        )
    return value


def workspace_path_check(path: object) -> str:
    """A files_hint entry, kept as written. First the reference's rule for files_hint
    (``task_model.validate_workspace_path``, with its code TASK_PATH_OUTSIDE_WORKSPACE): a
    non-empty string without NUL, workspace-relative (no ``/`` or drive prefix, ``\\`` read
    as ``/``), no ``:``, no ``..`` segment. Then the workspace path rules that lock paths
    follow (``agentchat.core.rules.paths``), which the reference does not apply to files_hint, with
    TASK_INVALID_FILES_HINT: control characters, lone surrogates and bidi overrides,
    backslashes, percent-escapes (``%2e%2e/x``), segments that Unicode compatibility turns into
    dots or separators (full-width dots, U+FF0E), Windows reserved names, segments ending in a dot
    or a space, and the length limits."""
    shown = safe_text(path)

    def outside(reason: str) -> NoReturn:
        raise AppError(
            "TASK_PATH_OUTSIDE_WORKSPACE",
            f"files_hint path is outside the channel workspace: {shown!r} ({reason})",
            detail={"field": "files_hint", "path": shown if isinstance(path, str) else None},
        )

    if not isinstance(path, str) or not path or "\x00" in path:
        outside("invalid path text")
    portable = path.replace("\\", "/")
    drive, _ = ntpath.splitdrive(portable)
    if drive or portable.startswith("/"):
        outside("absolute paths are not allowed")
    if ":" in portable:
        outside("path names may not contain ':'")
    if ".." in PurePosixPath(portable).parts:
        outside("parent traversal is not allowed")
    workspace_path_normalize(path, code="TASK_INVALID_FILES_HINT", field="files_hint")
    return path


def new_task_id_check(value: object) -> str:
    """The id of a task to create: ``selectors.task_id_check``, and not a reserved word.
    Raises TASK_INVALID_ID."""
    task_id = selectors.task_id_check(value)
    if task_id.lower() in RESERVED_TASK_IDS:
        raise AppError(
            "TASK_INVALID_ID", f"{task_id!r} is reserved", detail={"field": "id", "value": task_id}
        )
    return task_id


def depends_on_check(value: object) -> list[str]:
    result: list[str] = []
    seen: set[str] = set()
    for item in _list_check(value, "depends_on", "TASK_INVALID_DEPENDS_ON"):
        dependency = selectors.task_id_check(
            item, field="dependency", code="TASK_INVALID_DEPENDENCY_ID"
        )
        if dependency in seen:
            raise AppError(
                "TASK_DUPLICATE_DEPENDENCY",
                f"dependency is listed more than once: {dependency}",
                detail={"field": "depends_on", "dependency": dependency},
            )
        seen.add(dependency)
        result.append(dependency)
    return result


def files_hint_check(value: object) -> list[str]:
    return [
        workspace_path_check(item)
        for item in _list_check(value, "files_hint", "TASK_INVALID_FILES_HINT")
    ]


def acceptance_check(value: object) -> list[str]:
    return [
        line_check(item, "acceptance item", "TASK_INVALID_ACCEPTANCE")
        for item in _list_check(value, "acceptance", "TASK_INVALID_ACCEPTANCE")
    ]


def title_check(value: object) -> str:
    """One line, may be empty (the reference allows it). Raises TASK_INVALID_TITLE."""
    return line_check(value, "title", "TASK_INVALID_TITLE", allow_empty=True)


def branch_check(value: object) -> str:
    """One non-blank line. Raises TASK_INVALID_BRANCH."""
    return line_check(value, "branch", "TASK_INVALID_BRANCH")


def owner_check(value: object) -> str:
    return check_agent_name(value, field="owner", code="TASK_INVALID_OWNER")


def status_check(value: object) -> str:
    if not isinstance(value, str) or value not in selectors.STATUSES:
        raise AppError(
            "TASK_INVALID_STATUS",
            f"unknown task status: {value[:100]!r}"
            if isinstance(value, str)
            else "status must be a string",
            detail={"field": "status", "value": value[:100] if isinstance(value, str) else None},
        )
    return value


def reason_check(value: object) -> str:
    """A lease recovery (or force-release) reason. The reference's rule for its lease family
    (``lease_store._validate_reason``, its message for a missing and a blank reason alike), with
    the one-line rule of every such field (``agentchat.core.rules.validation.reason_check``, which
    locks share). Raises LEASE_INVALID_REASON."""
    return core_reason_check(
        value, code="LEASE_INVALID_REASON", empty_message="recovery reason must not be empty"
    )
