"""The words of a message search (channels_app.search): what a query may be, as a pure
function (the schemathesis hooks judge queries with it, without Django's apps)."""

from __future__ import annotations

import re

from agentchat.core.rules.errors import AppError

SEARCH_QUERY_MAX = 200
SEARCH_TERMS_MAX = 8
SEARCH_TERM_MAX = 64
# A prefix (``word*``) is matched against every token of the index that starts with it: a
# short one stands for a large part of the vocabulary, and several of them multiply the work
# (eight one-letter prefixes over 5,700 messages: 1.2 s a query). A prefix must be this long,
# and a query holds at most so many (else SEARCH_TOO_BROAD).
SEARCH_PREFIX_MIN = 3
SEARCH_PREFIXES_MAX = 2
_WORD = re.compile(r"\w+\*?", re.UNICODE)


def search_terms(query: object) -> list[str]:
    """The words of a search. Raises INVALID_VALUE (no words, too long, too many),
    SEARCH_TOO_BROAD (a prefix too short, too many prefixes)."""
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
    prefixes = [term for term in terms if term.endswith("*")]
    short = [term for term in prefixes if len(term) - 1 < SEARCH_PREFIX_MIN]
    if short or len(prefixes) > SEARCH_PREFIXES_MAX:
        raise AppError(
            "SEARCH_TOO_BROAD",
            f"a prefix (word*) has at least {SEARCH_PREFIX_MIN} characters before the *, and "
            f"a query at most {SEARCH_PREFIXES_MAX} prefixes",
            detail={
                "field": "q",
                "prefix_min": SEARCH_PREFIX_MIN,
                "prefixes_max": SEARCH_PREFIXES_MAX,
                "too_short": short,
            },
        )
    return terms
