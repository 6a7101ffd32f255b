"""Value checks of tasks and leases: the reference's record rules (REFERENCE-CLI §3.7-3.8),
each failure with the field's stable TASK_* / LEASE_* code.

Pure: nothing here reads the database, so the folder import of a later issue can judge a
record with the same rules before it writes anything.
"""

from __future__ import annotations

import math
import ntpath
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Any, NoReturn

from agentchat.core.api import field_size_check
from agentchat.core.errors import AppError
from agentchat.core.names import check_agent_name
from tasks_app import selectors

DEFAULT_LEASE_SECONDS = 300
# Reserved: ``POST …/tasks/recover-pending/`` is routed before ``…/tasks/<id>/``.
RESERVED_TASK_IDS = frozenset({"recover-pending"})


# --- durations -----------------------------------------------------------------------------------


def lease_expiry(now: datetime, lease_seconds: object) -> datetime:
    """``now + lease_seconds``. Raises LEASE_INVALID_DURATION unless ``lease_seconds`` is a
    JSON number (not a bool), finite, > 0, with a representable expiry."""

    def invalid(message: str) -> NoReturn:
        raise AppError("LEASE_INVALID_DURATION", message, detail={"field": "lease_seconds"})

    if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, (int, float)):
        invalid("lease duration must be a number of seconds")
    if isinstance(lease_seconds, float) and not math.isfinite(lease_seconds):
        invalid("lease duration must be positive")
    if lease_seconds <= 0:
        invalid("lease duration must be positive")
    try:
        return now + timedelta(seconds=lease_seconds)
    except (OverflowError, ValueError):
        invalid("lease duration is outside the supported timestamp range")


# --- values --------------------------------------------------------------------------------------


def text_check(value: object, field: str, code: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str):
        raise AppError(code, f"{field} must be a string", detail={"field": field})
    if not allow_empty and not value.strip():
        raise AppError(code, f"{field} must not be empty", detail={"field": field})
    if "\x00" in value or "\r" in value or "\n" in value:
        raise AppError(
            code, f"{field} contains a forbidden control character", detail={"field": field}
        )
    field_size_check(field, value)
    return value


def _list_check(value: object, field: str, code: str) -> list[Any]:
    if not isinstance(value, list):
        raise AppError(code, f"{field} must be a JSON array", detail={"field": field})
    return value


def workspace_path_check(path: object) -> str:
    """A files_hint entry: workspace-relative, no drive, no ``:``, no ``..``."""

    def outside(reason: str) -> NoReturn:
        raise AppError(
            "TASK_PATH_OUTSIDE_WORKSPACE",
            f"files_hint path is outside the channel workspace: {path!r} ({reason})",
            detail={"field": "files_hint", "path": path if isinstance(path, str) else None},
        )

    if not isinstance(path, str) or not path or "\x00" in path:
        outside("invalid path text")
    field_size_check("files_hint", path)
    portable = path.replace("\\", "/")
    drive, _ = ntpath.splitdrive(portable)
    if drive or portable.startswith("/"):
        outside("absolute paths are not allowed")
    if ":" in portable:
        outside("path names may not contain ':'")
    if ".." in PurePosixPath(portable).parts:
        outside("parent traversal is not allowed")
    return path


def depends_on_check(value: object) -> list[str]:
    result: list[str] = []
    for item in _list_check(value, "depends_on", "TASK_INVALID_DEPENDS_ON"):
        dependency = selectors.check_task_id(
            item, field="dependency", code="TASK_INVALID_DEPENDENCY_ID"
        )
        if dependency in result:
            raise AppError(
                "TASK_DUPLICATE_DEPENDENCY",
                f"dependency is listed more than once: {dependency}",
                detail={"field": "depends_on", "dependency": dependency},
            )
        result.append(dependency)
    return result


def files_hint_check(value: object) -> list[str]:
    return [
        workspace_path_check(item)
        for item in _list_check(value, "files_hint", "TASK_INVALID_FILES_HINT")
    ]


def acceptance_check(value: object) -> list[str]:
    return [
        text_check(item, "acceptance item", "TASK_INVALID_ACCEPTANCE")
        for item in _list_check(value, "acceptance", "TASK_INVALID_ACCEPTANCE")
    ]


def owner_check(value: object) -> str:
    return check_agent_name(value, field="owner", code="TASK_INVALID_OWNER")


def status_check(value: object) -> str:
    if not isinstance(value, str) or value not in selectors.STATUSES:
        raise AppError(
            "TASK_INVALID_STATUS",
            f"unknown task status: {value!r}",
            detail={"field": "status", "value": value if isinstance(value, str) else None},
        )
    return value


def reason_check(value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise AppError(
            "LEASE_INVALID_REASON", "recovery reason must not be empty", detail={"field": "reason"}
        )
    if "\x00" in value or "\r" in value or "\n" in value:
        raise AppError(
            "LEASE_INVALID_REASON",
            "recovery reason contains a forbidden control character",
            detail={"field": "reason"},
        )
    field_size_check("reason", value)
    return value
