"""Capability and status events (CLI "Adapter-neutral event commands", REFERENCE-CLI §3.12):
the shipped JSON Schema, the one validator, and the pure record shapes — the event object,
its body bytes and the message it rides in — that the API and (with the sync issue) the folder
renderer and the import share.

Validity is the schema's (``schemas/agent-chat-event.schema.json``, judged by ``jsonschema``);
the *code* of a violation is the reference's: its validator checks in a fixed order and stops
at the first failure, while a schema reports every failure at once, so each failure is ranked
by the place of its check in that order and the first one wins:

1. not an object ``EVENT_INVALID_RECORD``; 2. ``schema_version`` ``EVENT_UNSUPPORTED_VERSION``;
3. ``event`` ``EVENT_INVALID_TYPE``; 4. keys the type does not take ``EVENT_UNKNOWN_FIELD``
(the message is their sorted names); 5. ``agent`` then 6. ``harness``: missing
``EVENT_REQUIRED_FIELD_MISSING``, bad ``EVENT_INVALID_TEXT``; 7. ``ts`` missing
``EVENT_REQUIRED_FIELD_MISSING``, bad ``EVENT_INVALID_TIMESTAMP``; 8. ``primitives``
``EVENT_INVALID_PRIMITIVES`` / ``EVENT_DUPLICATE_PRIMITIVE`` / ``EVENT_UNKNOWN_PRIMITIVE``;
9. ``status`` ``EVENT_INVALID_STATUS``; 10. ``detail`` ``EVENT_INVALID_TEXT``.

Work is bounded whatever the value: the schema sees a probe of it (the known keys, one unknown
key if there are any, at most ``len(PRIMITIVES) + 1`` primitives); the codes that depend on
more than the probe shows (the unknown names, which primitive check fails) are computed from
the whole value in one linear pass. ``jsonschema`` alone took 8 s for a list of 150,000
primitives (an error object per item) and is quadratic on unsortable lists.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any, NamedTuple

from jsonschema import Draft202012Validator, FormatChecker, ValidationError

from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import text_check

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "agent-chat-event.schema.json"
SCHEMA_VERSION = 1
TYPES = ("capability", "status")
# The portable primitives, in the reference's order (also a capability event's default).
PRIMITIVES = (
    "messages",
    "cursors",
    "wait",
    "tasks",
    "dependencies",
    "leases",
    "path_locks",
    "state_summary",
)
STATUSES = ("ready", "busy", "idle", "blocked", "stopped")
COMMON_FIELDS = ("schema_version", "event", "agent", "harness", "ts")
TYPE_FIELDS = {"capability": ("primitives",), "status": ("status", "detail")}
KNOWN_FIELDS = (*COMMON_FIELDS, "primitives", "status", "detail")
# An event message: ``status`` and ``title`` carry the type (REFERENCE-CLI §3.12).
STATUS_PREFIX = "event."
TITLE_PREFIX = "event:"
# Unknown names quoted in an error's detail (the message names them all, as the reference).
UNKNOWN_SHOWN = 20


@cache
def event_schema() -> dict[str, Any]:
    """The shipped schema (read once)."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def timestamp_valid(value: object) -> bool:
    """The reference's ``ts`` rule: a string that ``datetime.fromisoformat`` reads (a final
    ``Z`` or ``z`` meaning ``+00:00``) and that has an offset."""
    if not isinstance(value, str):
        return False
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return False
    return parsed.tzinfo is not None


_FORMATS = FormatChecker(formats=())
# The schema's "date-time" is the reference's rule, not RFC 3339's (which is stricter in some
# places and looser in none that matters here); asserted, as a format is not by default.
_FORMATS.checks("date-time")(timestamp_valid)


@cache
def _validator() -> Draft202012Validator:
    schema = event_schema()
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema, format_checker=_FORMATS)


# Ranks in the reference's check order (see the module docstring).
_RANK_RECORD, _RANK_VERSION, _RANK_TYPE, _RANK_UNKNOWN = 0, 1, 2, 3
_RANK_FIELD = {"agent": 4, "harness": 5, "ts": 6, "primitives": 7, "status": 8, "detail": 9}


def _missing(error: ValidationError) -> list[str]:
    """The names a ``required`` failure is about."""
    instance = error.instance if isinstance(error.instance, dict) else {}
    return [name for name in error.validator_value if name not in instance]


def _ranks(error: ValidationError) -> list[int]:
    """Where the checks that ``error`` fails stand in the reference's order."""
    path = list(error.absolute_path)
    if path:
        name = path[0]
        if name == "schema_version":
            return [_RANK_VERSION]
        if name == "event":
            return [_RANK_TYPE]
        return [_RANK_FIELD[name]] if name in _RANK_FIELD else [_RANK_UNKNOWN]
    if error.validator == "type":
        return [_RANK_RECORD]
    if error.validator == "additionalProperties" or "propertyNames" in error.absolute_schema_path:
        return [_RANK_UNKNOWN]
    if error.validator == "required":
        ranks = []
        for name in _missing(error):
            if name == "schema_version":
                ranks.append(_RANK_VERSION)
            elif name == "event":
                ranks.append(_RANK_TYPE)
            else:
                ranks.append(_RANK_FIELD[name])
        return ranks
    # allOf / if-then wrap the failures of their branch: rank what they contain.
    return [rank for sub in error.context for rank in _ranks(sub)] or [_RANK_UNKNOWN]


def _probe(value: dict[str, Any]) -> dict[str, Any]:
    """What the schema is shown of ``value``: enough to decide every check, bounded in size."""
    probe = {name: value[name] for name in KNOWN_FIELDS if name in value}
    unknown = next((name for name in value if name not in KNOWN_FIELDS), None)
    if unknown is not None:
        probe[unknown] = None
    primitives = probe.get("primitives")
    if isinstance(primitives, list) and len(primitives) > len(PRIMITIVES):
        probe["primitives"] = primitives[: len(PRIMITIVES) + 1]  # still over maxItems
    return probe


def unknown_fields(value: Mapping[str, Any]) -> list[str]:
    """The keys of ``value`` that its type does not take (a type that is none takes only the
    common ones), sorted."""
    kind = value.get("event")
    allowed = {*COMMON_FIELDS, *(TYPE_FIELDS.get(kind, ()) if isinstance(kind, str) else ())}
    return sorted(str(name) for name in value if name not in allowed)


def _primitives_error(primitives: object) -> AppError:
    """The reference's primitives checks on the whole list, in its order (linear)."""
    if (
        not isinstance(primitives, list)
        or not primitives
        or any(not isinstance(item, str) for item in primitives)
    ):
        return AppError(
            "EVENT_INVALID_PRIMITIVES",
            "primitives must be a non-empty list of strings",
            detail={"field": "primitives"},
        )
    if len(set(primitives)) != len(primitives):
        return AppError(
            "EVENT_DUPLICATE_PRIMITIVE",
            "primitives must be unique",
            detail={"field": "primitives"},
        )
    unknown = next(item for item in primitives if item not in PRIMITIVES)
    return AppError(
        "EVENT_UNKNOWN_PRIMITIVE",
        unknown,
        detail={"field": "primitives", "value": unknown[:100], "choices": list(PRIMITIVES)},
    )


def _shown(value: object) -> object:
    """A value quoted in an error's detail: short, and never a big structure."""
    if value is None or isinstance(value, bool | int | float):
        return value
    return (value if isinstance(value, str) else json.dumps(value, default=str))[:100]


def _unknown_error(names: list[str]) -> AppError:
    return AppError(
        "EVENT_UNKNOWN_FIELD",
        ", ".join(names),
        detail={"fields": names[:UNKNOWN_SHOWN], "count": len(names)},
    )


def _error(rank: int, value: dict[str, Any], extra: list[str]) -> AppError:
    if rank == _RANK_VERSION:
        return AppError(
            "EVENT_UNSUPPORTED_VERSION",
            f"schema_version must be {SCHEMA_VERSION}",
            detail={"field": "schema_version", "value": _shown(value.get("schema_version"))},
        )
    if rank == _RANK_TYPE:
        return AppError(
            "EVENT_INVALID_TYPE",
            "event must be capability or status",
            detail={"field": "event", "value": _shown(value.get("event")), "choices": list(TYPES)},
        )
    if rank == _RANK_UNKNOWN:
        return _unknown_error(sorted({*unknown_fields(value), *extra}))
    name = next(field for field, field_rank in _RANK_FIELD.items() if field_rank == rank)
    if name in ("agent", "harness", "ts") and name not in value:
        return AppError("EVENT_REQUIRED_FIELD_MISSING", name, detail={"field": name})
    if name == "ts":
        return AppError(
            "EVENT_INVALID_TIMESTAMP",
            "ts must be an ISO-8601 string with an offset",
            detail={"field": "ts", "value": _shown(value["ts"])},
        )
    if name == "primitives":
        return _primitives_error(value.get("primitives"))
    if name == "status":
        return AppError(
            "EVENT_INVALID_STATUS",
            str(_shown(value.get("status"))),
            detail={
                "field": "status",
                "value": _shown(value.get("status")),
                "choices": list(STATUSES),
            },
        )
    return AppError(
        "EVENT_INVALID_TEXT",
        f"{name} is invalid: non-empty text without control characters, '/', '\\' or ':', "
        "not starting with '.' or '_'"
        if name != "detail"
        else "detail is invalid: text without control characters",
        detail={"field": name},
    )


def event_validate(value: object, *, extra_unknown: Iterable[str] = ()) -> dict[str, Any]:
    """``value`` as a valid event (a copy), or the reference's first violation.

    ``extra_unknown`` names fields a request carried beside the event's own (the REST body has
    no ``schema_version``, ``agent`` or ``ts``): they are unknown fields at the reference's
    place in the order. Raises EVENT_INVALID_RECORD, EVENT_UNSUPPORTED_VERSION,
    EVENT_INVALID_TYPE, EVENT_UNKNOWN_FIELD, EVENT_REQUIRED_FIELD_MISSING, EVENT_INVALID_TEXT,
    EVENT_INVALID_TIMESTAMP, EVENT_INVALID_PRIMITIVES, EVENT_DUPLICATE_PRIMITIVE,
    EVENT_UNKNOWN_PRIMITIVE, EVENT_INVALID_STATUS."""
    if not isinstance(value, dict):
        raise AppError("EVENT_INVALID_RECORD", "event must be an object")
    extra = sorted(set(extra_unknown))
    ranks = [rank for error in _validator().iter_errors(_probe(value)) for rank in _ranks(error)]
    if extra:
        ranks.append(_RANK_UNKNOWN)
    if not ranks:
        return dict(value)
    raise _error(min(ranks), value, extra)


# The event's free one-line texts (``status`` and ``primitives`` are names from a closed list).
VISIBLE_FIELDS = ("agent", "harness", "detail")


def event_visible_check(event: Mapping[str, Any]) -> None:
    """Refuse, with INVISIBLE_CHARACTER, an event whose one-line texts hold an invisible or
    direction-changing character (``agentchat.core.rules.validation.invisible_problem``): a
    harness or detail shown on the agents page must read as it compares. Checked where an
    event is written (a post, an import), not where a stored one is read, so events stored
    before the rule still read."""
    for name in VISIBLE_FIELDS:
        if isinstance(value := event.get(name), str):
            text_check(value, field=name, visible=True)


def event_one_line_check(event: Mapping[str, Any]) -> None:
    """Refuse, with EVENT_INVALID_TEXT, an event whose harness or detail holds a line or
    paragraph separator (U+2028, U+2029), which the schema's control ranges leave out but which
    break a one-line field as a newline does. Checked where the server takes an event (a post),
    not on an import: the reference writes such events, and every folder it writes imports."""
    for name in ("harness", "detail"):
        if isinstance(value := event.get(name), str):
            text_check(
                value, field=name, code="EVENT_INVALID_TEXT", single_line=True, visible=False
            )


def event_build(
    *,
    type: object,
    agent: str,
    harness: object = None,
    ts: str,
    primitives: object = None,
    status: object = None,
    detail: object = None,
) -> dict[str, Any]:
    """The event object a post makes (not yet validated): ``schema_version``, ``agent`` and
    ``ts`` are the server's; None is an omitted field. A capability event without primitives
    advertises all eight, in the reference's order, as ``event post`` does."""
    event: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "event": type, "agent": agent}
    if harness is not None:
        event["harness"] = harness
    event["ts"] = ts
    if type == "capability":
        event["primitives"] = list(PRIMITIVES) if primitives is None else primitives
    elif primitives is not None:
        event["primitives"] = primitives  # not a field of this type: refused as unknown
    if status is not None:
        event["status"] = status
    if detail is not None:
        event["detail"] = detail
    return event


# The fields of a post's request (the server fills ``schema_version``, ``agent`` and ``ts``).
REQUEST_FIELDS = ("type", "harness", "primitives", "status", "detail")
# What the request's judgement puts where the server's ``ts`` goes: a valid stand-in, as the
# server's own is (its spelling, ``ts_seconds``), so that only the request's fields are judged.
_TS_STAND_IN = "1970-01-01T00:00:00+00:00"


@dataclass(frozen=True)
class EventRequest:
    """An event a post asks for, judged valid (``event_request_parse``): with the server's
    ``agent`` and ``ts`` added (``event``) it is an event the schema takes. A capability event
    holds its primitives (all eight when the request named none), a status event its status
    and maybe a detail."""

    type: str
    harness: str
    primitives: tuple[str, ...] = ()
    status: str | None = None
    detail: str | None = None

    def event(self, *, agent: str, ts: str) -> dict[str, Any]:
        """The event object, its keys in ``event_build``'s order. ``agent`` is an agent's name
        and ``ts`` the server's spelling (``ts_seconds``), both valid by construction."""
        event: dict[str, Any] = {
            "schema_version": SCHEMA_VERSION,
            "event": self.type,
            "agent": agent,
            "harness": self.harness,
            "ts": ts,
        }
        if self.type == "capability":
            event["primitives"] = list(self.primitives)
        else:
            event["status"] = self.status
            if self.detail is not None:
                event["detail"] = self.detail
        return event


def event_request_parse(body: Mapping[str, object], *, agent: str) -> EventRequest:
    """A post's request (its JSON object) as an event of ``agent``, or the reference's first
    violation: the request's fields judged as ``event_validate`` judges an event, in the
    reference's order (a field beside ``REQUEST_FIELDS`` is unknown at its place in it; None
    is an omitted field), then ``event_one_line_check`` and ``event_visible_check``.

    Raises the codes of ``event_validate``, FIELD_TOO_LARGE, INVISIBLE_CHARACTER."""
    event = event_validate(
        event_build(
            type=body.get("type"),
            agent=agent,
            harness=body.get("harness"),
            ts=_TS_STAND_IN,
            primitives=body.get("primitives"),
            status=body.get("status"),
            detail=body.get("detail"),
        ),
        extra_unknown=[str(name) for name in body if name not in REQUEST_FIELDS],
    )
    event_one_line_check(event)
    event_visible_check(event)
    return EventRequest(
        type=event["event"],
        harness=event["harness"],
        primitives=tuple(event.get("primitives", ())),
        status=event.get("status"),
        detail=event.get("detail"),
    )


def event_body(event: Mapping[str, Any]) -> str:
    """The body of an event message, as the reference writes it: compact JSON, keys sorted,
    non-ASCII kept."""
    return json.dumps(event, ensure_ascii=False, sort_keys=True, separators=(",", ":"))


class EventMessage(NamedTuple):
    """The message an event rides in: a broadcast (``to: all``)."""

    status: str
    title: str
    body: str


def event_message(event: Mapping[str, Any]) -> EventMessage:
    kind = event["event"]
    return EventMessage(f"{STATUS_PREFIX}{kind}", f"{TITLE_PREFIX}{kind}", event_body(event))


def event_parse(body: str, *, where: str) -> dict[str, Any]:
    """A stored event body back to the event (the reference strips the body first). Raises
    EVENT_MALFORMED_BODY naming ``where`` when it is no JSON, else the codes of
    ``event_validate``."""
    try:
        value = json.loads(body.strip())
    except (ValueError, RecursionError):
        raise AppError("EVENT_MALFORMED_BODY", where, detail={"where": where}) from None
    return event_validate(value)
