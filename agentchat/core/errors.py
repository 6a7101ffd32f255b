"""The one application error type and its single mapping to HTTP.

In app code, just raise ``AppError("CODE", "message", detail={...})``. The HTTP status comes
from ``STATUS_BY_CODE`` (one table for every app), so a code always means the same status.
Every surface (DRF views, the wait consumer, websocket error frames, management commands)
turns the error into the body ``{"error": {"code", "message", "detail"}}`` through
``error_body``.
"""

from __future__ import annotations

from typing import Any

# Codes not listed here are validation failures: 400.
STATUS_BY_CODE: dict[str, int] = {
    # auth
    "AUTH_REQUIRED": 401,
    "AUTH_INVALID": 401,
    "SENDER_MISMATCH": 403,
    "FORBIDDEN": 403,
    # lookups
    "NOT_FOUND": 404,
    "CHANNEL_NOT_FOUND": 404,
    "TASK_NOT_FOUND": 404,
    "LEASE_NOT_FOUND": 404,
    "PATH_LOCK_NOT_FOUND": 404,
    "METHOD_NOT_ALLOWED": 405,
    # conflicts
    "CHANNEL_EXISTS": 409,
    "MARKER_ALREADY_CLAIMED": 409,
    "ID_CONFLICT": 409,
    "TASK_ALREADY_EXISTS": 409,
    "TASK_INVALID_TRANSITION": 409,
    "TASK_DEPENDENCY_NOT_READY": 409,
    "TASK_DEPENDENCY_CYCLE": 409,
    "LEASE_CONFLICT": 409,
    "LEASE_RECOVERY_REQUIRED": 409,
    "LEASE_NOT_EXPIRED": 409,
    "LEASE_MUTATION_REQUIRED": 409,
    "LEASE_TRANSACTION_NOT_FOUND": 409,
    "LEASE_OWNER_MISMATCH": 403,
    "TASK_CONFLICT": 409,  # ours: a compare-and-set on a task row lost (never expected)
    "PATH_LOCK_CONFLICT": 409,
    "PATH_LOCK_RECOVERY_REQUIRED": 409,
    "PATH_LOCK_NOT_STALE": 409,
    "PATH_LOCK_OWNER_MISMATCH": 403,
    # sizes
    "REQUEST_TOO_LARGE": 413,
    "FIELD_TOO_LARGE": 413,
    "UNSUPPORTED_MEDIA_TYPE": 415,
    "SERVICE_UNAVAILABLE": 503,
}


class AppError(Exception):
    """An expected failure with a stable code; services raise it, surfaces render it."""

    def __init__(self, code: str, message: str, *, detail: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.detail = detail or {}

    @property
    def status(self) -> int:
        return STATUS_BY_CODE.get(self.code, 400)


def error_body(exc: AppError) -> dict[str, Any]:
    return {"error": {"code": exc.code, "message": exc.message, "detail": exc.detail}}
