"""The one error table, the one application error type, and the one renderer.

Every code the server can answer is declared once below (``_TABLE``) with its HTTP status, its
command-line exit family and one line saying what it means. In app code, just raise
``AppError("CODE", "message", detail={...})`` with the code as a string literal, so that a
code can be found by grep; raising an undeclared code is a programming error
(``UndeclaredErrorCode``), and a test scans the sources for literal codes that are not declared.

Every surface turns an error into its answer through ``error_render``: the DRF exception
handler, the API lane, the 404/500 handlers, the wait endpoint, websocket error frames and
management commands (``error_command``); the CLI and the MCP server render the same codes.

Exit families are the reference CLI's (REFERENCE-CLI §5): 1 for plain errors (every
``PATH_LOCK_*`` and ``STATE_*`` code among them), 2 for ``TASK_*``, ``LEASE_*``, ``EVENT_*`` and
usage errors, 3 for a lost marker claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.core.management.base import CommandError
from django.http import HttpResponse

from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.terminal import terminal_safe
from agentchat.exits import EXIT_CLAIM_LOST as EXIT_CLAIM_LOST  # the families, for callers
from agentchat.exits import EXIT_PLAIN as EXIT_PLAIN
from agentchat.exits import EXIT_USAGE as EXIT_USAGE
from agentchat.exits import exit_family


@dataclass(frozen=True)
class ErrorCode:
    code: str
    status: int
    exit: int
    meaning: str


# (code, HTTP status, meaning). Grouped by what they are about; the exit family is
# ``agentchat.exits``'s (the client's too), declared there for a code outside its family.
_TABLE: tuple[tuple[Any, ...], ...] = (
    # --- authentication and identity
    ("AUTH_REQUIRED", 401, "no bearer token (or session) was sent"),
    ("AUTH_INVALID", 401, "the token is unknown or revoked, or the Authorization header is bad"),
    ("SENDER_MISMATCH", 403, "`from` names another agent than the token's"),
    ("FORBIDDEN", 403, "the request is not allowed (e.g. a websocket Origin that is not ours)"),
    ("AGENT_NOT_FOUND", 404, "no agent of that name"),
    # --- the agent registry (EP-0118): registration, heartbeats, the idle handshake
    (
        "AGENT_NOT_REGISTERED",
        404,
        "the agent has no registration (or the run token's registration was taken over)",
    ),
    (
        "AGENT_ALREADY_ACTIVE",
        409,
        "a live registration of that agent holds another run token (reclaim with the same one)",
    ),
    (
        "AGENT_OUTSIDE_NAMESPACE",
        403,
        "a token acts as its own agent and its sub-agents (alice.*) only, never as a human",
    ),
    (
        "RATE_LIMITED",
        429,
        "the agent's post budget (AGENTCHAT_POST_RATE) is spent; retry after Retry-After seconds",
    ),
    (
        "LOOP_SUSPECTED",
        429,
        "the channel is flagged for a suspected loop of agents answering each other "
        "(AGENTCHAT_LOOP_GUARD_REFUSE): agents may post again once a human posts or after "
        "Retry-After seconds",
    ),
    (
        "ACTING_AS_FORBIDDEN",
        403,
        "the AgentChat-As header names neither the token's agent nor one of its sub-agents "
        "(a name under it with a dot; a sub-agent may not act as its parent), or came with a "
        "browser session",
    ),
    (
        "SUBAGENTS_TOO_MANY",
        409,
        "the token's agent has as many sub-agents (256) as it may: AgentChat-As names a new one",
    ),
    (
        "ADMIN_TOKEN_REQUIRED",
        403,
        "the admin monitor (/v1/monitor) takes the server's AGENT_CHAT_ADMIN_TOKEN only",
    ),
    (
        "ADMIN_TOKEN_NOT_ALLOWED",
        403,
        "the admin token (AGENT_CHAT_ADMIN_TOKEN) is refused everywhere but the admin monitor",
    ),
    ("MONITOR_DISABLED", 404, "the server has no AGENT_CHAT_ADMIN_TOKEN: no admin monitor"),
    # --- the request itself
    ("INVALID_HOST", 400, "the Host header is not one of ALLOWED_HOSTS"),
    (
        "INVALID_HEADER",
        400,
        "a header's name is not an HTTP token, or its value holds a byte HTTP forbids there "
        "(NUL, VT, FF, FS/GS/RS, NEL 0x85)",
    ),
    (
        "MALFORMED_REQUEST",
        400,
        "the request line or a header line is not HTTP/1.1 (a target with spaces or non-ASCII "
        "bytes, a header line without a colon, a bad Content-Length or chunk)",
    ),
    ("INVALID_JSON", 400, "the body is not a JSON object (bad UTF-8, syntax, duplicate keys)"),
    ("INVALID_TEXT", 400, "a string or key is not valid Unicode text (e.g. a lone surrogate)"),
    ("JSON_TOO_DEEP", 400, "JSON nested deeper than the limit (64 levels)"),
    ("UNKNOWN_FIELD", 400, "a field or query parameter that the operation does not take"),
    ("MISSING_FIELD", 400, "a required field is missing"),
    ("INVALID_TYPE", 400, "a field has the wrong JSON type"),
    ("INVALID_VALUE", 400, "a field's value is out of its range or rules"),
    (
        "INVISIBLE_CHARACTER",
        400,
        "a one-line field (name, title, status, topic, reason, an event's harness or detail) "
        "holds an invisible, direction-changing or blank-looking character (Unicode Cf: "
        "U+202E, U+200D, U+FEFF...; U+3164, U+2800...)",
    ),
    (
        "STATUS_RESERVED",
        400,
        "a message's status is one the server's own audit messages use or of their families "
        "(task.*, lease.*, path.lock.*...), or one of HTTP v1's kinds (receipt, contact.*), "
        "compared NFKC-normalized and case-folded",
    ),
    ("INVALID_NAME", 400, "an agent, channel or marker name breaks the naming rules"),
    ("INVALID_SEQ", 400, "a seq (after, since, ack) is not an integer in range"),
    ("INVALID_TIMEOUT", 400, "a wait timeout is not a number of seconds in range"),
    (
        "INVALID_CURSOR",
        400,
        "an inbox cursor (or Last-Event-ID) that is not a sequence number up to the inbox's "
        "tail, or a malformed monitor cursor",
    ),
    (
        "MONITOR_CURSOR_RETIRED",
        400,
        "a monitor cursor of version 1 (per-inbox positions), which this server no longer "
        "reads: detail.resume_cursor is where to re-read from without losing a delivery",
    ),
    ("NOT_ACCEPTABLE", 406, "the client does not accept application/json"),
    ("METHOD_NOT_ALLOWED", 405, "the route does not take this method"),
    ("REQUEST_TOO_LARGE", 413, "the request body is over the limit (768 KiB)"),
    ("REQUEST_LINE_TOO_LONG", 414, "the request line (its URL) is over 16 KiB"),
    (
        "HEADERS_TOO_LARGE",
        431,
        "a header line, or the request line and headers together, is over 16 KiB",
    ),
    ("FIELD_TOO_LARGE", 413, "one field is over its limit (512 KiB)"),
    ("UNSUPPORTED_MEDIA_TYPE", 415, "the body is not application/json"),
    # --- the multiplexed websocket (/ws/channels/): error frames
    (
        "STREAM_TOO_MANY_CHANNELS",
        400,
        "a subscribe beyond the channels one connection may follow (a setting)",
    ),
    ("STREAM_TOO_MANY_FRAMES", 429, "a client frame beyond the connection's budget (it refills)"),
    (
        "STREAM_TOO_MANY_CONNECTIONS",
        429,
        "the agent (or signed-in person) has its most websockets open, across the server's "
        "processes (AGENTCHAT_WS_MAX_PER_AGENT): an error frame, then the close 4429",
    ),
    (
        "SSE_TOO_MANY_FOLLOWS",
        429,
        "the agent (or the monitor) has its most live follows open, across the server's "
        "processes (AGENTCHAT_SSE_MAX_PER_AGENT)",
    ),
    # --- lookups
    ("NOT_FOUND", 404, "no such route or object"),
    ("CHANNEL_NOT_FOUND", 404, "no such channel (or it is members-only and you are no member)"),
    ("REPLY_TO_NOT_FOUND", 400, "reply_to names no message of the channel"),
    (
        "MESSAGE_NOT_FOUND",
        404,
        "no envelope of that id (of that kind) was delivered to the caller's inbox",
    ),
    ("CONTACT_NOT_FOUND", 404, "no contact of that id in the caller's address book"),
    # --- channels, messages, markers
    ("CHANNEL_EXISTS", 409, "a channel of that name exists (names are unique ignoring case)"),
    ("CHANNEL_MEMBERS_REQUIRED", 400, "a members-only channel would have no agent as member"),
    ("CHANNEL_NOT_MAINTAINER", 403, "the channel names a maintainer: only they change it"),
    (
        "ID_CONFLICT",
        409,
        "the message id is used by another sender or channel; an envelope id (HTTP v1) the "
        "sender already used for other content",
    ),
    (
        "CHANNEL_DIRECT",
        409,
        "a direct channel (HTTP v1 envelopes of a pair of agents) takes no posts, events, "
        "audits or changes of its own: send through /v1/",
    ),
    ("MARKER_ALREADY_CLAIMED", 409, "another agent holds the marker"),
    # --- EP-0118 signals and the whiteboard
    (
        "SIGNAL_INVALID_TYPE",
        400,
        "a signal type that is not inform, query, delegate, ack, warn, sleep_event or "
        "sleep_request",
    ),
    ("SIGNAL_NOT_FOUND", 404, "an acknowledged id names no signal of the channel"),
    (
        "SIGNAL_NOT_ADDRESSED",
        403,
        "an acknowledged signal is not addressed to the caller (nor to a sub-agent of it), or "
        "is its own",
    ),
    ("INVALID_KEY", 400, "a whiteboard key breaks [A-Za-z0-9][A-Za-z0-9._-]*, at most 128"),
    ("KEY_NOT_FOUND", 404, "no whiteboard entry of that key in the channel"),
    (
        "WHITEBOARD_FULL",
        409,
        "the channel's whiteboard holds as many keys (256) or value bytes (1 MiB) as it may",
    ),
    # --- tasks (the reference's TASK_* codes)
    ("TASK_NOT_FOUND", 404, "no such task in the channel"),
    ("TASK_ALREADY_EXISTS", 409, "a task with that id exists (ids are unique ignoring case)"),
    ("TASK_INVALID_ID", 400, "a task id breaks [A-Za-z0-9][A-Za-z0-9._-]*, at most 128"),
    ("TASK_INVALID_TITLE", 400, "a task title is empty, not one line, or too long"),
    ("TASK_INVALID_STATUS", 400, "an unknown task status"),
    ("TASK_INVALID_OWNER", 400, "an owner that is not a valid agent name"),
    ("TASK_INVALID_BRANCH", 400, "a branch that is not one line of text"),
    ("TASK_INVALID_ACCEPTANCE", 400, "acceptance is not a list of lines of text"),
    ("TASK_INVALID_FILES_HINT", 400, "files_hint is not a list of workspace paths"),
    ("TASK_INVALID_DEPENDS_ON", 400, "depends_on is not a list of task ids"),
    ("TASK_INVALID_DEPENDENCY_ID", 400, "a dependency is not a valid task id"),
    ("TASK_DUPLICATE_DEPENDENCY", 400, "a dependency is listed twice"),
    ("TASK_UNKNOWN_DEPENDENCY", 400, "a dependency names no task of the channel"),
    ("TASK_DEPENDENCY_CYCLE", 409, "the dependencies would form a cycle"),
    ("TASK_DEPENDENCY_NOT_READY", 409, "entering in_progress or done needs every dependency done"),
    ("TASK_INVALID_TRANSITION", 409, "the status transition is not allowed"),
    ("TASK_INVALID_UPDATE", 400, "an update that names no field"),
    ("TASK_PATH_OUTSIDE_WORKSPACE", 400, "a files_hint path leaves the workspace"),
    ("TASK_UNKNOWN_FIELD", 400, "a task request field that is not known"),
    ("TASK_REQUIRED_FIELD_MISSING", 400, "a required task field is missing"),
    (
        "TASK_NOT_OWNER",
        403,
        "the task has another owner: only its owner, creator or the channel's maintainer change it",
    ),
    ("TASK_CONFLICT", 409, "the task changed concurrently (a compare-and-set lost)"),
    ("TASK_INVALID_RECORD", 400, "an imported task record is not a JSON object"),
    ("TASK_INVALID_CREATED_BY", 400, "an imported task's created_by is not one line of text"),
    ("TASK_INVALID_TIMESTAMP", 400, "an imported task time is not ISO-8601 with a UTC offset"),
    ("TASK_RECORD_ID_MISMATCH", 400, "an imported task's id is not its file name"),
    ("TASK_CHANNEL_MISMATCH", 400, "an imported task names another channel than its folder"),
    # --- leases (the reference's LEASE_* codes)
    ("LEASE_NOT_FOUND", 404, "the task has no lease"),
    ("LEASE_CONFLICT", 409, "another agent holds an unexpired lease"),
    ("LEASE_RECOVERY_REQUIRED", 409, "the lease expired: recover it explicitly with a reason"),
    ("LEASE_NOT_EXPIRED", 409, "recovery of a lease that has not expired"),
    ("LEASE_MUTATION_REQUIRED", 409, "owner and status of a leased task change by lease actions"),
    ("LEASE_TRANSACTION_NOT_FOUND", 409, "nothing is pending: mutations are single transactions"),
    ("LEASE_OWNER_MISMATCH", 403, "the lease belongs to another agent"),
    ("LEASE_INVALID_DURATION", 400, "lease_seconds is not a number from 0.001 to the maximum"),
    ("LEASE_INVALID_REASON", 400, "a recovery reason that is empty or not one line"),
    ("LEASE_INVALID_OWNER", 400, "an owner that is not a valid agent name"),
    ("LEASE_UNKNOWN_FIELD", 400, "a lease request field that is not known"),
    ("LEASE_REQUIRED_FIELD_MISSING", 400, "a required lease field is missing"),
    ("LEASE_INVALID_RECORD", 400, "an imported claim record is not a JSON object, or is partial"),
    ("LEASE_INVALID_TASK_ID", 400, "an imported claim's task_id is not a record id"),
    ("LEASE_INVALID_TIMESTAMP", 400, "an imported lease time is not ISO-8601 with a UTC offset"),
    ("LEASE_RECORD_ID_MISMATCH", 400, "an imported claim is not named <task_id>.<owner>.json"),
    (
        "LEASE_INCONSISTENT",
        409,
        "an imported task and its claim disagree (owner, expiry, status, count, channel)",
    ),
    ("LEASE_TRANSACTION_PENDING", 409, "a folder holds claims/.lease-transaction.json"),
    # --- fencing tokens of leases and path locks (docs/tasks.md, docs/locks.md)
    (
        "INVALID_FENCE",
        400,
        "`fence` is not a JSON integer (or, in a query, ASCII digits) from 0 to 10^18-1",
    ),
    ("STALE_FENCE", 409, "the fence sent is not the task's or lock's current one"),
    # --- path locks (the reference's PATH_LOCK_* codes; exit family 1 as in the reference)
    ("PATH_LOCK_NOT_FOUND", 404, "no lock with that id or path"),
    ("PATH_LOCK_CONFLICT", 409, "the paths overlap an active lock (or each other)"),
    ("PATH_LOCK_RECOVERY_REQUIRED", 409, "the paths overlap an expired lock: recover it"),
    ("PATH_LOCK_NOT_STALE", 409, "recovery of a lock that has not expired"),
    ("PATH_LOCK_OWNER_MISMATCH", 403, "the lock belongs to another agent"),
    ("PATH_LOCK_INVALID_PATH", 400, "a path that breaks the workspace path rules"),
    ("PATH_LOCK_INVALID_OWNER", 400, "an owner that is not a valid agent name"),
    ("PATH_LOCK_INVALID_DURATION", 400, "lease_seconds is not a number from 0.001 to the maximum"),
    ("PATH_LOCK_INVALID_REASON", 400, "a recovery reason that is empty or not one line"),
    ("PATH_LOCK_INVALID_LOCK_ID", 400, "a malformed lock id, or both or neither of id and path"),
    (
        "PATH_LOCK_PATTERN_TOO_COMPLEX",
        400,
        "a path with over 16 wildcards, or globs too costly to compare with the locks held",
    ),
    (
        "PATH_LOCK_TOO_MANY_PATTERNS",
        409,
        "the caller, or the channel's unexpired locks, hold as many patterns starting with a "
        "wildcard as they may (settings)",
    ),
    (
        "PATH_LOCK_TOO_MANY_PATHS",
        409,
        "the caller, or the channel's unexpired locks, hold as many lock entries (paths) as they "
        "may (settings)",
    ),
    ("PATH_LOCK_INVALID_RECORD", 400, "an imported lock record breaks the reference's rules"),
    ("PATH_LOCK_INVALID_TIMESTAMP", 400, "an imported lock time is not ISO-8601 with an offset"),
    ("PATH_LOCK_TRANSACTION_PENDING", 409, "a folder holds locks/.path-lock-transaction.json"),
    # --- capability and status events (the reference's EVENT_* codes, in its check order)
    ("EVENT_INVALID_RECORD", 400, "an event that is not a JSON object"),
    ("EVENT_UNSUPPORTED_VERSION", 400, "schema_version is not the integer 1"),
    ("EVENT_INVALID_TYPE", 400, "the event type is not capability or status"),
    ("EVENT_UNKNOWN_FIELD", 400, "a field the event type does not take (the message names all)"),
    ("EVENT_REQUIRED_FIELD_MISSING", 400, "agent, harness or ts is missing"),
    (
        "EVENT_INVALID_TEXT",
        400,
        "agent or harness is empty, has a control character, '/', '\\' or ':', or starts with "
        "'.' or '_'; or detail has a control character",
    ),
    ("EVENT_INVALID_TIMESTAMP", 400, "ts is not an ISO-8601 string with an offset"),
    ("EVENT_INVALID_PRIMITIVES", 400, "primitives is not a non-empty list of strings"),
    ("EVENT_DUPLICATE_PRIMITIVE", 400, "a primitive is listed twice"),
    ("EVENT_UNKNOWN_PRIMITIVE", 400, "a primitive that is not one of the eight portable ones"),
    ("EVENT_INVALID_STATUS", 400, "status is not ready, busy, idle, blocked or stopped"),
    ("EVENT_MALFORMED_BODY", 400, "a stored event message whose body is not JSON"),
    # --- the state summary (the reference's STATE_* codes that a server can meet)
    (
        "STATE_MALFORMED_SOURCE",
        409,
        "strict state: a message the reference's state or event read cannot get through",
    ),
    ("STATE_RECORD_NOT_FOUND", 404, "the channel was never compacted (no stored state)"),
    (
        "STATE_TOO_LARGE",
        409,
        "the summary is over AGENTCHAT_STATE_MAX_BYTES even with every message text shortened",
    ),
    # --- the folder sync (manage.py sync_folder)
    (
        "SYNC_ROOT_FOREIGN",
        409,
        "the sync's root is not empty and was not made by sync_folder (no .agentchat-sync/)",
    ),
    ("SYNC_ROOT_INVALID", 400, "the sync's root is not a directory or cannot be made one"),
    ("SYNC_BUSY", 409, "another sync_folder holds this root"),
    ("SYNC_GIT_FAILED", 500, "a git command of --git-commit failed"),
    (
        "SYNC_GIT_HOOK_FAILED",
        409,
        "a git hook refused the sync's commit (the files stay written; --git-no-verify skips it)",
    ),
    (
        "SYNC_GIT_HOOK_STAGED",
        409,
        "a git hook staged paths that are not the sync's: its commit is undone, the index as it "
        "was (the files stay written; --git-no-verify skips the hook)",
    ),
    # --- the server
    # --- the folder import (import_folder): each names the file it is about
    ("IMPORT_ROOT_INVALID", 400, "the import's root is not a readable directory"),
    ("IMPORT_CHANNEL_NOT_FOUND", 404, "no channel folder (holding _meta.json) of that name"),
    ("IMPORT_PATH_OUTSIDE_ROOT", 400, "a symbolic link where the import reads (never followed)"),
    ("IMPORT_UNREADABLE", 400, "a file is not a regular file, not UTF-8 or cannot be read"),
    ("IMPORT_LIMIT_EXCEEDED", 413, "a file is too big, or a folder holds too many entries"),
    ("IMPORT_INVALID_FILE_NAME", 400, "a message, cursor or marker file name is malformed"),
    ("IMPORT_BAD_FRONTMATTER", 400, "a message file's frontmatter is missing or malformed"),
    ("IMPORT_DUPLICATE_SEQ", 409, "two message files carry the same seq"),
    ("IMPORT_INVALID_META", 400, "_meta.json is not a valid channel description"),
    ("IMPORT_INVALID_FENCES", 400, "_fences.json is not an object of fences (docs/folder.md)"),
    ("IMPORT_INVALID_CURSOR", 400, "a cursor file holds no message number"),
    ("IMPORT_FOLDER_CHANGED", 409, "a file changed while it was being imported"),
    # --- heavy requests (agentchat.core.db.heavy)
    (
        "HEAVY_REQUEST_BUSY",
        429,
        "the agent has a heavy request (state, search, a list) running and the queue is full",
    ),
    (
        "WORK_BUDGET_EXCEEDED",
        503,
        "a heavy request ran out of its work budget (AGENTCHAT_HEAVY_BUDGET_SECONDS); retry",
    ),
    (
        "SEARCH_TOO_BROAD",
        400,
        "a search prefix (word*) shorter than 3 characters, or more than 2 prefixes",
    ),
    ("SERVICE_UNAVAILABLE", 503, "the server cannot take the request now"),
    (
        "DATABASE_UNAVAILABLE",
        503,
        "the database is down, restarting or unreachable (the server reconnects by itself): "
        "retry after Retry-After seconds; a post retried with its id is stored once",
    ),
    (
        "STORAGE_FULL",
        507,
        "the database's disk is full: the write was rolled back, reads still work",
    ),
    ("INTERNAL_ERROR", 500, "a bug: the server logged it"),
)


ERRORS: dict[str, ErrorCode] = {}
for _row in _TABLE:
    _code, _status, _meaning = _row
    if _code in ERRORS:
        raise RuntimeError(f"error code {_code} is declared twice")
    ERRORS[_code] = ErrorCode(_code, _status, exit_family(_code), _meaning)


class UndeclaredErrorCode(LookupError):
    """Raised (a bug, answered 500) when code raises an AppError whose code is not declared."""


class ClientGone(Exception):
    """The client went away before its answer could be sent. A service whose answer is the
    delivery (a read or wait moving a cursor) raises it to undo its transaction; whoever serves
    the request then sends nothing (there is no one to send it to)."""


class AppError(Exception):
    """An expected failure with a stable, declared code; services raise it, surfaces render it."""

    def __init__(self, code: str, message: str, *, detail: dict[str, Any] | None = None) -> None:
        if code not in ERRORS:
            raise UndeclaredErrorCode(f"error code {code!r} is not declared in the error table")
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.detail = detail or {}

    @property
    def status(self) -> int:
        return ERRORS[self.code].status

    @property
    def exit_code(self) -> int:
        return ERRORS[self.code].exit


@dataclass(frozen=True)
class RenderedError:
    """An error as every surface sends it: status, headers and the JSON body."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)

    def content(self) -> bytes:
        """The body in the bytes DRF's renderer writes (compact): one spelling for every
        surface, whichever answers."""
        return json_bytes(self.body)


def _jsonable(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "replace").decode("utf-8")  # a lone surrogate -> "?"
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, dict):
        return {_jsonable(str(key)): _jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(item) for item in value]
    return _jsonable(str(value))


def error_body(exc: AppError) -> dict[str, Any]:
    """``{"error": {"code", "message", "detail"}}``, always encodable as JSON: a detail may
    quote what the client sent, so lone surrogates become "?", NaN and other values strings."""
    return {
        "error": {
            "code": exc.code,
            "message": _jsonable(exc.message),
            "detail": _jsonable(exc.detail),
        }
    }


def error_render(exc: AppError) -> RenderedError:
    """The one renderer. 401 carries the bearer challenge; 405 names the allowed methods when
        the error's detail lists them (``detail={"allow": [...]}``); a 429 or 503 whose detail says
    ``retry_after`` (whole seconds, at least 1) carries it as ``Retry-After``."""
    headers: dict[str, str] = {}
    if exc.status == 401:
        headers["WWW-Authenticate"] = 'Bearer realm="agentchat"'
    retry_after = exc.detail.get("retry_after")
    if exc.status in (429, 503) and isinstance(retry_after, int) and retry_after >= 1:
        headers["Retry-After"] = str(retry_after)
    allow = exc.detail.get("allow")
    if exc.status == 405 and isinstance(allow, list):
        headers["Allow"] = ", ".join(str(method) for method in allow)
    return RenderedError(exc.status, error_body(exc), headers)


def internal_error() -> AppError:
    return AppError("INTERNAL_ERROR", "internal server error")


def error_command(exc: AppError) -> CommandError:
    """A management command's failure: ``CODE: message`` on stderr, exit status of the code's
    family (as the reference CLI); the message terminal-safe (``terminal.terminal_safe``): it
    may name a hostile file."""
    return CommandError(f"{exc.code}: {terminal_safe(exc.message)}", returncode=exc.exit_code)


def error_http_response(exc: AppError) -> HttpResponse:
    """The rendered error as a plain Django response (the API lane, the 404/500 handlers)."""
    rendered = error_render(exc)
    return HttpResponse(
        rendered.content(),
        status=rendered.status,
        headers={"Content-Type": "application/json", **rendered.headers},
    )


def error_table_markdown() -> str:
    """The table as docs/errors.md shows it (tests/project/test_docs.py keeps the page equal to
    this)."""
    lines = ["| code | HTTP | exit | meaning |", "| --- | --- | --- | --- |"]
    lines += [
        f"| `{spec.code}` | {spec.status} | {spec.exit} | {spec.meaning} |"
        for spec in ERRORS.values()
    ]
    return "\n".join(lines) + "\n"
