"""The one way the tests look at an error answer (an API client's response or an httpx one):
``error_code`` checks that it is one, ``code_or_none`` reads whatever came (a retrying client's
answer during a fault)."""

from __future__ import annotations

from typing import Any

from agentchat.core.rules.errors import ERRORS


def error_code(response: Any) -> str:
    """The code of an error answer, once it is checked to be one: the body is
    ``{"error": {"code", "message", "detail"}}`` with a declared code, sent with that code's
    status (agentchat/core/rules/errors.py)."""
    body = response.json()
    assert set(body) == {"error"}, response.content
    assert set(body["error"]) == {"code", "message", "detail"}, body
    code = body["error"]["code"]
    assert code in ERRORS, f"undeclared code {code!r}"
    assert response.status_code == ERRORS[code].status, (response.status_code, body)
    return code


def code_or_none(response: Any) -> str | None:
    """The error code of an answer that need not be an error, nor JSON: None for any other."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    return error.get("code") if isinstance(error, dict) else None
