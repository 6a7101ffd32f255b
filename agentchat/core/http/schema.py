"""The OpenAPI document: the bearer scheme, the error responses of every operation, the
constraints of every field, and the wait long-poll (served by a live endpoint, so DRF cannot see
it).

**Errors.** An operation declares the codes it raises beyond those every operation can answer
(``raises("TASK_NOT_FOUND", …)`` as its ``extend_schema(extensions=...)``; the hand-written wait
carries the same ``x-error-codes`` key). ``error_responses_hook`` (a postprocessing hook) adds
the common codes, groups the codes by their status in the one error table
(``agentchat.core.rules.errors.ERRORS``) and writes one response per status: a description listing
each code with its meaning, and the ``Error`` body with ``code`` restricted to those codes. So
the statuses, their descriptions and the codes a client may see come from the table and cannot
drift from it; a code raised but not declared breaks the response schema (schemathesis sees it).

**Constraints.** The patterns below are ECMA-262 regular expressions, as OpenAPI means them,
anchored with ``^…$`` (without the multiline flag ``$`` is the end of the string: no trailing
newline). Each is the schema spelling of a rule that lives in ``agentchat.core.rules.validation`` or
``agentchat.core.rules.names``; ``tests/core/http/test_schema.py`` checks that they agree.
Rules a pattern cannot say (a byte length, Unicode normalization, the state of the database)
are written in the field's description.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from drf_spectacular.extensions import (
    OpenApiAuthenticationExtension,
    OpenApiSerializerExtension,
    OpenApiSerializerFieldExtension,
)
from drf_spectacular.utils import OpenApiParameter

from agentchat.core.db.heavy import view_is_heavy
from agentchat.core.http.pages import LIST_LIMIT_MAX
from agentchat.core.rules.errors import ERRORS, UndeclaredErrorCode
from agentchat.core.rules.names import (
    AGENT_NAME_PATTERN,
    CHANNEL_NAME_PATTERN,
    RECORD_ID_PATTERN,
    any_case,
)
from agentchat.core.rules.records import MIN_LEASE_SECONDS
from agentchat.core.rules.validation import MAX_INT_DIGITS

# --- patterns ---------------------------------------------------------------------------------

# What a one-line field refuses (validation._NOT_ONE_LINE; lone surrogates cannot be written in
# a pattern, and the JSON parser refuses them in every string before a view runs).
_CONTROLS = r"\x00-\x1f\x7f-\x9f\u2028\u2029"
# What Python's str.strip() removes, less the controls above: "blank" is these only.
_SPACES = r" \xa0\u1680\u2000-\u200a\u202f\u205f\u3000"
TEXT_PATTERN = r"^[^\x00]*$"  # any text: every string refuses NUL
ONE_LINE_PATTERN = rf"^[^{_CONTROLS}]*$"
NON_BLANK_ONE_LINE_PATTERN = rf"^[^{_CONTROLS}]*[^{_CONTROLS}{_SPACES}][^{_CONTROLS}]*$"

# Lock paths and files_hint (agentchat.core.rules.paths): what a pattern can say of the rules.
# Refused characters (controls, bidi overrides, backslash, ':'), a leading '/', '..' segments,
# percent-escapes, segments ending in a dot or a space, and Windows reserved names.
_PATH_CHARS = r"[^\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\\:]"


_RESERVED_SEGMENT = "(?:{})".format(
    "|".join(
        [any_case(name) for name in ("con", "prn", "aux", "nul")]
        + [any_case(base) + "[0-9\u00b9\u00b2\u00b3]" for base in ("com", "lpt")]
        + [any_case("conin$"), any_case("conout$")]
    )
)
WORKSPACE_PATH_PATTERN = (
    r"^(?!/)"
    r"(?!(?:.*/)?\.\.(?:/|$))"
    r"(?!.*%[0-9A-Fa-f]{2})"
    r"(?!(?:.*/)?(?:[^/]+\.|[^/]* )(?:/|$))"
    rf"(?!(?:.*/)?{_RESERVED_SEGMENT} *(?:\.[^/]*)?(?:/|$))"
    rf"{_PATH_CHARS}+$"
)
WORKSPACE_PATH_RULES = (
    "A workspace-relative path with `/` only. Besides the pattern: at most 1024 bytes in UTF-8, "
    "128 segments and 255 bytes per segment; the same rules hold for the Unicode compatibility "
    "form (NFKC) of each segment (full-width dots and solidus, the two-dot leader…)."
)


def one_line(*, max_length: int | None = None, non_blank: bool = False) -> dict[str, Any]:
    """The schema of a one-line string (no line separator or control character)."""
    schema: dict[str, Any] = {
        "type": "string",
        "pattern": NON_BLANK_ONE_LINE_PATTERN if non_blank else ONE_LINE_PATTERN,
    }
    if non_blank:
        schema["minLength"] = 1
    if max_length is not None:
        schema["maxLength"] = max_length
    return schema


def record_id(max_length: int) -> dict[str, Any]:
    """``[A-Za-z0-9][A-Za-z0-9._-]*`` (the reference's record ids: task ids, markers…)."""
    return {"type": "string", "pattern": RECORD_ID_PATTERN, "minLength": 1, "maxLength": max_length}


AGENT_NAME = {"type": "string", "pattern": AGENT_NAME_PATTERN, "minLength": 1, "maxLength": 64}
CHANNEL_NAME = {
    "type": "string",
    "pattern": CHANNEL_NAME_PATTERN,
    "minLength": 1,
    "maxLength": 64,
}
WORKSPACE_PATH = {
    "type": "string",
    "pattern": WORKSPACE_PATH_PATTERN,
    "minLength": 1,
    "maxLength": 1024,
}


def lease_seconds() -> dict[str, Any]:
    """A lease or lock duration (agentchat.core.rules.records.duration_check)."""
    return {
        "type": "number",
        "minimum": MIN_LEASE_SECONDS,
        "maximum": settings.AGENTCHAT_MAX_LEASE_SECONDS,
    }


def limit_parameter(maximum: int, description: str, *, default: int | None = None) -> Any:
    """``?limit=``: 1 to ``maximum`` (its ``default`` in the schema when given)."""
    schema: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": maximum}
    if default is not None:
        schema["default"] = default
    return OpenApiParameter("limit", schema, description=description)


# Sizes: a pattern counts characters, the server bytes (UTF-8); a character is at most 4 bytes.
def page_parameters(after: dict[str, Any], after_help: str) -> list[Any]:
    """``limit`` and ``after`` of a paged list (agentchat.core.http.pages): ``after`` is the list's
    key (its schema given), exclusive."""
    return [
        limit_parameter(
            LIST_LIMIT_MAX,
            "at most this many items; a page also stops at about AGENTCHAT_READ_MAX_BYTES of "
            "JSON (always at least one item)",
            default=LIST_LIMIT_MAX,
        ),
        OpenApiParameter(
            "after",
            after,
            description=f"start after this key (exclusive): {after_help}",
        ),
    ]


FIELD_MAX_CHARS = settings.AGENTCHAT_MAX_FIELD_BYTES
FIELD_BYTES_HELP = (
    f"at most {settings.AGENTCHAT_MAX_FIELD_BYTES} bytes in UTF-8 (413 FIELD_TOO_LARGE), and the "
    f"whole request at most {settings.AGENTCHAT_MAX_REQUEST_BYTES} bytes (413 REQUEST_TOO_LARGE)"
)
JSON_VALUE_HELP = (
    "any JSON value: every string and key valid text without NUL, nested at most 64 levels "
    f"(400 JSON_TOO_DEEP), at most {settings.AGENTCHAT_MAX_FIELD_BYTES} bytes as JSON"
)


def seq() -> dict[str, Any]:
    """A seq in a query parameter (agentchat.core.rules.validation.int_parse: ASCII digits)."""
    return {"type": "integer", "minimum": 0, "maximum": 10**MAX_INT_DIGITS - 1}


# Path parameters by name, the same in every operation that has them.
# An HTTP v1 envelope id (channels_app.envelopes.is_envelope_id).
ENVELOPE_ID_PATTERN = r"^(?!\.+$)[A-Za-z0-9._:-]{1,128}$"
PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "name": CHANNEL_NAME,
    "task_id": record_id(128),
    "marker": record_id(128),
    "lock_id": record_id(64),
    "key": record_id(128),
    "agent_id": AGENT_NAME,
    "contact_id": AGENT_NAME,
    "message_id": {
        "type": "string",
        "pattern": ENVELOPE_ID_PATTERN,
        "minLength": 1,
        "maxLength": 128,
    },
}


# --- fields -----------------------------------------------------------------------------------


class DocumentedFieldExtension(OpenApiSerializerFieldExtension):
    """Fields of ``agentchat.core.http.rest`` carry the rules of their values: a one-line text field
    gets the one-line pattern, any text field the no-NUL pattern, and ``openapi={...}`` given to
    the field is merged last (a pattern, bounds, a type for the raw JSON fields)."""

    target_class = "agentchat.core.http.rest.Documented"
    match_subclasses = True

    def map_serializer_field(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        from agentchat.core.http.rest import RawJSONField, StrictCharField

        field = self.target
        if isinstance(field, RawJSONField):
            schema: dict[str, Any] = {}
        else:
            schema = auto_schema._map_serializer_field(field, direction, bypass_extensions=True)
        if isinstance(field, StrictCharField):
            schema["pattern"] = ONE_LINE_PATTERN if field.single_line else TEXT_PATTERN
        schema.update(copy.deepcopy(field.openapi))
        return schema


_BLANK = {"type": "string", "maxLength": 0}


def _blank_unwrapped(schema: Any) -> Any:
    """drf-spectacular offers "" beside the pattern of a field that allows blank
    (``oneOf: [<schema>, {maxLength: 0}]``); our patterns say themselves whether "" is valid,
    and with a oneOf a "" that both accept would be invalid."""
    if isinstance(schema, list):
        return [_blank_unwrapped(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    schema = {key: _blank_unwrapped(value) for key, value in schema.items()}
    one_of = schema.get("oneOf")
    if isinstance(one_of, list) and len(one_of) == 2 and one_of[1] == _BLANK:
        del schema["oneOf"]
        schema.update(one_of[0])
    return schema


class StrictSerializerExtension(OpenApiSerializerExtension):
    """Input serializers refuse unknown fields (``additionalProperties: false``) and may add
    rules across their fields as ``openapi_schema`` (``required`` adds to the required ones)."""

    target_class = "agentchat.core.http.rest.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: str) -> dict[str, Any]:
        schema: dict[str, Any] = _blank_unwrapped(
            auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        )
        if "__doc__" not in vars(type(self.target)) or not type(self.target).__doc__:
            schema.pop("description", None)  # not StrictSerializer's own docstring
        schema["additionalProperties"] = False
        from agentchat.core.http.rest import RawJSONField

        for name, field in self.target.fields.items():
            if isinstance(field, RawJSONField) and not field.nullable:
                schema["properties"].get(name, {}).pop("nullable", None)
        for key, value in copy.deepcopy(getattr(self.target, "openapi_schema", {})).items():
            if key == "required":
                schema["required"] = sorted({*schema.get("required", []), *value})
            else:
                schema[key] = value
        return schema


# --- errors -----------------------------------------------------------------------------------

ERROR_CODES_KEY = "x-error-codes"

# Every operation: authentication, the request's envelope (lane.py, DRF's negotiation), a bug.
COMMON_CODES = (
    "INVALID_HOST",
    "INVALID_VALUE",  # a query parameter given twice (request_check)
    "UNKNOWN_FIELD",  # a query parameter the operation does not declare (agentchat.core.http.query)
    "AUTH_REQUIRED",
    "AUTH_INVALID",
    "ADMIN_TOKEN_NOT_ALLOWED",  # the admin monitor's token, anywhere else
    "METHOD_NOT_ALLOWED",
    "NOT_ACCEPTABLE",
    "REQUEST_TOO_LARGE",
    "REQUEST_LINE_TOO_LONG",  # the server's request class (agentchat.core.http.webrequest)
    "HEADERS_TOO_LARGE",
    "INTERNAL_ERROR",
    "DATABASE_UNAVAILABLE",  # agentchat.core.db.faults: the database is down or restarting
    # The AgentChat-As header (BearerTokenScheme): a bad name, not a sub-agent of the token's
    # agent, or a new sub-agent past the bound.
    "INVALID_NAME",
    "ACTING_AS_FORBIDDEN",
    "SUBAGENTS_TOO_MANY",
)
# Operations that read a JSON body (the parser runs before the view).
# INVISIBLE_CHARACTER: any one-line text field of a body (agentchat.core.rules.validation).
BODY_CODES = (
    "INVALID_JSON",
    "INVALID_TEXT",
    "JSON_TOO_DEEP",
    "UNSUPPORTED_MEDIA_TYPE",
    "INVISIBLE_CHARACTER",
    "STORAGE_FULL",  # a write on a full disk (agentchat.core.db.faults)
)
BODY_METHODS = frozenset({"post", "put", "patch"})
# Operations with path parameters: a part that does not fit the route (a '/' in it) is no route.
PATH_CODES = ("NOT_FOUND",)
# Operations on one channel: it does not exist, or the caller may not see it.
CHANNEL_CODES = ("CHANNEL_NOT_FOUND",)

# Writes of a channel that post a message (a post, an event, the audit of a task, lock or
# channel change) or take from it (a marker claim): the sender's post budget
# (agentchat.core.identity.rates) and the loop guard (channels_app.services.loopguard). Reads,
# acks, a lock check and recover-pending post nothing. A direct channel (HTTP v1) takes
# envelopes only: any other write there is CHANNEL_DIRECT.
POSTING_CODES = ("RATE_LIMITED", "LOOP_SUSPECTED", "CHANNEL_DIRECT")
POSTING_METHODS = frozenset({"post", "put", "patch", "delete"})
NOT_POSTING = ("/read/", "/ack/", "/locks/check/", "/recover-pending/")

# Heavy operations (agentchat.core.db.heavy, the lane's gate and work budget).
HEAVY_CODES = ("HEAVY_REQUEST_BUSY", "WORK_BUDGET_EXCEEDED")

_HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


def raises(*codes: str) -> dict[str, list[str]]:
    """The ``extensions`` of an operation's ``extend_schema``: the error codes it raises beyond
    the common ones. Raises UndeclaredErrorCode (at import) for a code not in the table."""
    for code in codes:
        if code not in ERRORS:
            raise UndeclaredErrorCode(f"error code {code!r} is not declared in the error table")
    return {ERROR_CODES_KEY: list(codes)}


def operation_codes(
    path: str, method: str, declared: Iterable[str], *, heavy: bool = False
) -> list[str]:
    """Every code the operation ``method path`` may answer: the common ones, then its own."""
    codes = list(COMMON_CODES)
    if heavy:
        codes += HEAVY_CODES
    if method in BODY_METHODS:
        codes += BODY_CODES
    if "{" in path:
        codes += PATH_CODES
    if "/channels/{name}/" in path:
        codes += CHANNEL_CODES
    if (
        method in POSTING_METHODS
        and path.rstrip("/").count("/") >= 4  # a channel's own path or one under it
        and "/channels/{name}" in path
        and not path.endswith(NOT_POSTING)
    ):
        codes += POSTING_CODES
    codes += declared
    return list(dict.fromkeys(codes))


def error_responses(codes: Iterable[str]) -> dict[str, dict[str, Any]]:
    """OpenAPI response objects by status for these codes, from the error table."""
    by_status: dict[int, list[str]] = {}
    for code in codes:
        by_status.setdefault(ERRORS[code].status, []).append(code)
    responses = {}
    for status in sorted(by_status):
        group = by_status[status]
        responses[str(status)] = {
            "description": "\n".join(f"- `{code}`: {ERRORS[code].meaning}" for code in group),
            "content": {
                "application/json": {
                    "schema": {
                        "allOf": [
                            {"$ref": "#/components/schemas/Error"},
                            {
                                "type": "object",
                                "properties": {
                                    "error": {
                                        "type": "object",
                                        "properties": {"code": {"enum": group}},
                                    }
                                },
                            },
                        ]
                    }
                }
            },
        }
    return responses


def _body_required(operation: dict[str, Any], components: dict[str, Any]) -> None:
    """A body whose schema requires something is required (drf-spectacular leaves the body of
    a PATCH optional; an empty body is the object ``{}`` to the server)."""
    body = operation.get("requestBody")
    if body is None:
        return
    for media in body.get("content", {}).values():
        schema = media.get("schema", {})
        ref = schema.get("$ref", "")
        # A component, or a schema written inline (the events' oneOf of two shapes).
        component = components.get(ref.rsplit("/", 1)[-1], {}) if ref else schema
        if component.get("required") or component.get("anyOf") or component.get("oneOf"):
            body["required"] = True


def error_responses_hook(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """Postprocessing hook: every operation's error responses and path parameters."""
    # APPEND_PATHS is merged into the result as is: copy, so the module's dicts stay untouched.
    result["paths"] = copy.deepcopy(result["paths"])
    generator = kwargs.get("generator")
    views = {
        (path, method.lower()): getattr(callback, "cls", None)
        for path, _regex, method, callback in getattr(generator, "endpoints", None) or ()
    }
    for path, item in result["paths"].items():
        for method in _HTTP_METHODS:
            operation = item.get(method)
            if operation is None:
                continue
            heavy = view_is_heavy(views.get((path, method)), method)
            codes = operation_codes(path, method, operation.get(ERROR_CODES_KEY, []), heavy=heavy)
            operation[ERROR_CODES_KEY] = codes
            responses = {
                status: response
                for status, response in operation.get("responses", {}).items()
                if not status.startswith(("4", "5"))
            }
            operation["responses"] = {**responses, **error_responses(codes)}
            _body_required(operation, result["components"].get("schemas", {}))
            for parameter in operation.get("parameters", []):
                if parameter.get("in") == "path" and parameter["name"] in PATH_PARAMETERS:
                    parameter["schema"] = copy.deepcopy(PATH_PARAMETERS[parameter["name"]])
    return result


class _BearerScheme(OpenApiAuthenticationExtension):
    """An HTTP bearer scheme of the schema; its subclasses name the authentication class and
    say what the token is (this base matches no class: ``target_class`` None)."""

    description = ""

    def get_security_definition(self, auto_schema: Any) -> dict[str, Any]:
        return {"type": "http", "scheme": "bearer", "description": self.description}


class BearerTokenScheme(_BearerScheme):
    target_class = "agentchat.core.identity.auth.BearerTokenAuthentication"
    name = "bearer"
    description = (
        "An agent token from `manage.py create_agent_token NAME`. With the "
        "header `AgentChat-As: NAME.SUB` the request acts as a sub-agent of the token's "
        "agent (a name under it with a dot: alice's token as alice.critic), on every "
        "operation: 403 ACTING_AS_FORBIDDEN for any other name, 400 INVALID_NAME for a bad "
        "one, 409 SUBAGENTS_TOO_MANY past 256 sub-agents (docs/signals.md)."
    )


class AdminTokenScheme(_BearerScheme):
    target_class = "agentchat.core.identity.auth.AdminTokenAuthentication"
    name = "adminBearer"
    description = (
        "The server's admin token, AGENT_CHAT_ADMIN_TOKEN (the admin monitor "
        "only; no agent token is one)."
    )


WAIT_PATH = {
    "/api/v1/channels/{name}/wait/": {
        "get": {
            "operationId": "channels_wait",
            "summary": "Wait for a relevant message (long-poll)",
            "description": (
                "Returns as soon as a message relevant to the caller exists after its cursor "
                "(a page, and the cursor moves, like read: `more: true` when relevant messages "
                "remain), or after `timeout` seconds with `timed_out: true` and the cursor "
                "unchanged. Holds no server thread while parked. A revoked token ends a parked "
                "wait with 401."
            ),
            "tags": ["channels"],
            "security": [{"bearer": []}],
            "parameters": [
                {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                {
                    "name": "timeout",
                    "in": "query",
                    "schema": {
                        "type": "number",
                        "minimum": 0,
                        "maximum": settings.AGENTCHAT_WAIT_MAX_TIMEOUT,
                        "default": settings.AGENTCHAT_WAIT_DEFAULT_TIMEOUT,
                    },
                    "description": "seconds; at most AGENTCHAT_WAIT_MAX_TIMEOUT (900)",
                },
                {
                    "name": "limit",
                    "in": "query",
                    "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 1000},
                    "description": "at most this many messages; a response also stops at "
                    "AGENTCHAT_READ_MAX_BYTES of messages (always at least one)",
                },
            ],
            "responses": {
                "200": {
                    "description": "messages, or a timeout",
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {
                                    "messages": {
                                        "type": "array",
                                        "items": {"$ref": "#/components/schemas/MessageOutput"},
                                    },
                                    "cursor": {"type": "integer"},
                                    "more": {"type": "boolean"},
                                    "timed_out": {"type": "boolean"},
                                },
                                "required": ["messages", "cursor", "more"],
                            }
                        }
                    },
                },
            },
            ERROR_CODES_KEY: ["INVALID_TIMEOUT", "INVALID_VALUE", "UNKNOWN_FIELD"],
        }
    }
}

ERROR_COMPONENT = {
    "schemas": {
        "Error": {
            "type": "object",
            "description": "Every error: a stable code, a message for people, and details.",
            "properties": {
                "error": {
                    "type": "object",
                    "properties": {
                        "code": {"type": "string", "example": "CHANNEL_NOT_FOUND"},
                        "message": {"type": "string"},
                        "detail": {"type": "object"},
                    },
                    "required": ["code", "message", "detail"],
                }
            },
            "required": ["error"],
        }
    }
}
