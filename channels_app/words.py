"""The words of a message search (channels_app.search): what a query may be, as a pure
function (the schemathesis hooks judge queries with it, without Django's apps)."""

from __future__ import annotations

import re

from agentchat.core.errors import AppError

SEARCH_QUERY_MAX = 200
SEARCH_TERMS_MAX = 8
SEARCH_TERM_MAX = 64
_WORD = re.compile(r"\w+\*?", re.UNICODE)


def search_terms(query: object) -> list[str]:
    """The words of a search. Raises INVALID_VALUE (no words, too long, too many)."""
    if not isinstance(query, str) or not query.strip():
        raise AppError("INVALID_VALUE", "q must name at least one word", detail={"field": "q"})
    if len(query) > SEARCH_QUERY_MAX:
        raise AppError(
            "INVALID_VALUE",
            f"q is at most {SEARCH_QUERY_MAX} characters",
            detail={"field": "q", "max": SEARCH_QUERY_MAX},
        )
    terms = [word for word in _WORD.findall(query) if len(word.rstrip("*")) > 0]
    if not terms:
        raise AppError("INVALID_VALUE", "q must name at least one word", detail={"field": "q"})
    if len(terms) > SEARCH_TERMS_MAX or any(len(term) > SEARCH_TERM_MAX for term in terms):
        raise AppError(
            "INVALID_VALUE",
            f"q is at most {SEARCH_TERMS_MAX} words of at most {SEARCH_TERM_MAX} characters",
            detail={"field": "q"},
        )
    return terms
