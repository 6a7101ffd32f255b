"""Schemathesis hooks for ``tests/schemathesis/run.py`` (loaded through SCHEMATHESIS_HOOKS).

- Path parameters are drawn from the objects the run seeded (a channel, a task, a lock, a
  marker) as well as from the schema, so generated requests reach past the 404s.
- ``positive_data_accepted`` is schemathesis's ``positive_data_acceptance`` (a request valid by
  the schema gets 2xx, 401, 403, 404 or 409) less exactly the refusals the schema cannot state,
  each recognised by the code the server answered **and** a check of the request itself:

  1. Bytes: a pattern counts characters, the server UTF-8 bytes. 413 ``FIELD_TOO_LARGE`` /
     ``REQUEST_TOO_LARGE`` only when the field or the body really is over its limit.
  2. Keys: OpenAPI 3.0 has no ``propertyNames``. ``metadata`` keys and every key inside
     ``data`` (and a whiteboard ``value``) are text too (one line for metadata): refused only
     when a key really breaks it; a whiteboard value's 64 KiB count its compact JSON.
  3. The database: ``reply_to`` naming no message (``REPLY_TO_NOT_FOUND``), a dependency naming
     no task (``TASK_UNKNOWN_DEPENDENCY``), an ack past the channel's last seq (``INVALID_SEQ``
     with ``detail.seq > detail.last_seq``), a members-only roster without an agent
     (``CHANNEL_MEMBERS_REQUIRED``: which names are agents is no property of the request),
     the sender's post budget spent (``RATE_LIMITED``: it counts the run's earlier posts).
  4. Workspace paths: the rules of ``agentchat.core.rules.paths`` a pattern cannot say (bytes,
     segment counts, the NFKC form of each segment), and a lock path's wildcard limit and
     work budget (``PATH_LOCK_PATTERN_TOO_COMPLEX``).
  5. HTTP v1: an inbox or address-book cursor beyond the tail (``INVALID_CURSOR`` with
     ``detail.cursor > detail.tail``); any ``INVALID_CURSOR`` of the monitor, whose cursor is
     opaque (base64url of versioned JSON no schema states; a version-1 one is
     ``MONITOR_CURSOR_RETIRED``); a metadata or labels key that
     is empty or over 128 bytes, or a value over 4 KiB in UTF-8 (the schema counts
     characters); a card whose ``id`` is not the path's contact id; a new channel named with
     the direct channels' reserved prefix ``dm.`` in any case (``INVALID_NAME``: the seeded
     direct channel's name is one the run draws).

Anything else refused is a failure: either the schema says too little or the server refuses
what it should take.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from typing import Any

import schemathesis
from hypothesis import strategies as st
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

KNOWN: dict[str, list[str]] = json.loads(os.environ.get("AGENTCHAT_ST_KNOWN", "{}"))

MAX_FIELD_BYTES = 512 * 1024
MAX_REQUEST_BYTES = 768 * 1024
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_PATH_PATTERN: re.Pattern[str] | None = None


@schemathesis.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    if not path_parameters:
        return st.just(path_parameters)
    choices = {
        name: st.sampled_from([value, *KNOWN.get(name, [])])
        for name, value in path_parameters.items()
    }
    return st.fixed_dictionaries(choices)


def _error(response: Any) -> tuple[str | None, dict[str, Any]]:
    try:
        error = json.loads(response.content)["error"]
    except (ValueError, KeyError, TypeError):
        return None, {}
    return error.get("code"), error.get("detail") or {}


def _utf8(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def _strings(value: Any) -> list[str]:
    """Every string and key in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [item for key, child in value.items() for item in [key, *_strings(child)]]
    if isinstance(value, list):
        return [item for child in value for item in _strings(child)]
    return []


def path_breaks_unwritten_rule(path: Any) -> bool:
    """The workspace path rules no pattern states (agentchat.core.rules.paths' module doc)."""
    if not isinstance(path, str):
        return False
    if len(path.encode("utf-8", "surrogatepass")) > 1024:
        return True
    from agentchat.core.rules.validation import INVISIBLE

    if INVISIBLE.search(path):  # an invisible character would show a path as another
        return True
    segments = [part for part in path.split("/") if part not in {"", "."}]
    if len(segments) > 128 or any(len(part.encode("utf-8")) > 255 for part in segments):
        return True
    # The same rules hold for each segment's NFKC form (which may also be "." or ".."), and
    # for the path's NFC form.
    if any(part != "." and unicodedata.normalize("NFKC", part) in {".", ".."} for part in segments):
        return True
    pattern = _workspace_path_pattern()
    for form in ("NFKC", "NFC"):
        normalized = "/".join(unicodedata.normalize(form, part) for part in path.split("/"))
        if pattern.fullmatch(normalized) is None:
            return True
    return False


def _workspace_path_pattern() -> re.Pattern[str]:
    global _PATH_PATTERN
    if _PATH_PATTERN is None:
        from agentchat.core.http.schema import WORKSPACE_PATH_PATTERN

        # ECMA's "$" (no multiline) is Python's "\Z".
        _PATH_PATTERN = re.compile(WORKSPACE_PATH_PATTERN[:-1] + r"\Z")
    return _PATH_PATTERN


def tolerated(case: Any, code: str | None, detail: dict[str, Any]) -> bool:
    body = case.body if isinstance(case.body, dict) else {}
    if code == "FIELD_TOO_LARGE" and detail.get("field") == "value" and "value" in body:
        # A whiteboard value: its bytes as compact JSON (channels_app.whiteboard).
        compact = json.dumps(body["value"], ensure_ascii=False, separators=(",", ":"))
        return len(compact.encode("utf-8", "surrogatepass")) > detail.get("limit", 0)
    if code == "FIELD_TOO_LARGE":
        field = detail.get("field")
        return field in body and _utf8(body[field]) > MAX_FIELD_BYTES
    if code == "REQUEST_TOO_LARGE":
        return _utf8(case.body) > MAX_REQUEST_BYTES
    if code in {"INVALID_VALUE", "INVALID_TEXT"} and detail.get("field") == "metadata":
        return any(_CONTROL.search(key) for key in body.get("metadata", {}))
    root = re.match(r"data|value", str(detail.get("field", "")))
    if code in {"INVALID_TEXT", "INVALID_VALUE"} and root:
        # Any JSON (a message's data, a whiteboard value): no NUL in its strings and keys.
        return any("\x00" in text for text in _strings(body.get(root.group())))
    if code in {"INVALID_VALUE", "SEARCH_TOO_BROAD"} and detail.get("field") == "q":
        # A search is words (channels_app.search.search_terms): "at least one word, at most
        # eight" is no rule a schema's string can state.
        from channels_app.words import search_terms

        try:
            search_terms((case.query or {}).get("q"))
        except Exception:
            return True
        return False
    if code == "INVISIBLE_CHARACTER":
        # Invisible, direction-changing and blank-looking characters in a one-line field: a
        # schema's string cannot exclude a set of characters.
        from agentchat.core.rules.validation import INVISIBLE

        texts = _strings(body) + _strings(dict(case.query or {}))
        return any(INVISIBLE.search(text) for text in texts if isinstance(text, str))
    if code == "INVALID_VALUE" and detail.get("field") == "status":
        # ``event.*`` is the events' (POST …/events/), ``status_key``-compared: no schema
        # string excludes a prefix under normalization and case folding.
        from agentchat.core.rules.audit import status_key
        from channels_app.events import STATUS_PREFIX

        status = body.get("status")
        return isinstance(status, str) and status_key(status).startswith(STATUS_PREFIX)
    if code == "STATUS_RESERVED":
        from agentchat.core.rules.audit import is_reserved

        status = body.get("status")
        return isinstance(status, str) and is_reserved(status)
    if code == "INVALID_NAME" and case.operation.path == "/api/v1/channels/":
        name = body.get("name")
        return isinstance(name, str) and name.lower().startswith("dm.")
    if code == "MONITOR_CURSOR_RETIRED":
        return case.operation.path == "/v1/monitor"
    if code == "INVALID_CURSOR":
        if case.operation.path == "/v1/monitor":
            return True
        return isinstance(detail.get("cursor"), int) and detail["cursor"] > detail.get("tail", 0)
    if code == "INVALID_VALUE" and detail.get("field") in {"metadata", "labels"}:
        return _string_map_breaks_unwritten_rule(body.get(detail["field"]))
    if (
        code == "INVALID_VALUE"
        and detail.get("field") == "id"
        and "contact_id" in (case.path_parameters or {})
    ):
        return body.get("id") != case.path_parameters["contact_id"]
    if code in {
        "REPLY_TO_NOT_FOUND",
        "TASK_UNKNOWN_DEPENDENCY",
        "CHANNEL_MEMBERS_REQUIRED",
        "RATE_LIMITED",
    }:
        return True
    if code == "INVALID_SEQ" and "last_seq" in detail:
        return isinstance(detail.get("seq"), int) and detail["seq"] > detail["last_seq"]
    if code in {"TASK_INVALID_FILES_HINT", "TASK_PATH_OUTSIDE_WORKSPACE"}:
        return any(path_breaks_unwritten_rule(path) for path in body.get("files_hint") or [])
    if code == "PATH_LOCK_INVALID_PATH":
        paths = body.get("paths") or [(case.query or {}).get("path")]
        return any(path_breaks_unwritten_rule(path) for path in paths)
    if code == "PATH_LOCK_PATTERN_TOO_COMPLEX":
        # Over 16 wildcards in a path (counted here from the request), or the request's work
        # budget, which depends on the locks held as well: no schema can state either.
        if "work_limit" in detail:
            return True
        return any(_lock_wildcards(path) > 16 for path in body.get("paths") or [])
    return False


def _string_map_breaks_unwritten_rule(value: Any) -> bool:
    """HTTP v1 metadata and labels (channels_app.envelopes.string_map_check): the bytes of keys
    and values, and empty keys, which OpenAPI 3.0 cannot state (no ``propertyNames``)."""
    if not isinstance(value, dict):
        return False
    return any(
        key == ""
        or _CONTROL.search(key)
        or len(key.encode("utf-8", "surrogatepass")) > 128
        or (isinstance(item, str) and len(item.encode("utf-8", "surrogatepass")) > 4096)
        for key, item in value.items()
    )


_WILDCARD = re.compile(r"\*+|\?|\[[!^]?\]?[^]]*\]")


def _lock_wildcards(path: Any) -> int:
    """Wildcards of a lock path as docs/locks.md states them: ``*`` runs, ``?``, ``[…]`` classes
    and ``**`` segments."""
    if not isinstance(path, str):
        return 0
    return sum(
        1 if len(part) >= 2 and set(part) == {"*"} else len(_WILDCARD.findall(part))
        for part in path.split("/")
    )


@schemathesis.check
def positive_data_accepted(ctx: Any, response: Any, case: Any) -> bool | None:
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        code, detail = _error(response)
        if tolerated(case, code, detail):
            _record(f"{case.operation.label} {response.status_code} {code}")
            _debug(case, response)
            return None
        raise


def _record(line: str) -> None:
    """The tolerated refusals, counted by run.py after the run."""
    path = os.environ.get("AGENTCHAT_ST_TOLERATED")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            out.write(line + "\n")


def _debug(case: Any, response: Any) -> None:
    """AGENTCHAT_ST_DEBUG=<file>: each tolerated request and its answer, to judge the rules."""
    path = os.environ.get("AGENTCHAT_ST_DEBUG")
    if path:
        with open(path, "a", encoding="utf-8") as out:
            request = f"{case.operation.label} {case.query} {case.body!r:.300}"
            out.write(f"{request} -> {response.content[:300]!r}\n")
