"""Query parameters: one rule for every endpoint. An operation takes the parameters it declares
and refuses any other with 400 UNKNOWN_FIELD (a misspelt ``?limt=`` silently ignored would give
the client a page it did not ask for).

DRF views declare theirs with ``@query_parameters(...)`` on the method: the same
``OpenApiParameter`` objects go to the OpenAPI document and to the check, so the schema and the
server cannot disagree, and declaring one more parameter is one line. The ASGI endpoints (wait,
websockets), which bypass DRF, call ``query_check`` with their own names; DRF's answer to
OPTIONS (``QueryCheckedMetadata``, the REST framework's metadata class) takes none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Collection, Iterable
from typing import Any, TypeVar

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.metadata import SimpleMetadata

from agentchat.core.rules.errors import AppError

Handler = TypeVar("Handler", bound=Callable[..., Any])
# How much of an unknown name an error quotes.
NAME_SHOWN = 40


def names_check(names: Iterable[str], allowed: Collection[str], *, what: str) -> None:
    """Raises UNKNOWN_FIELD naming the ``names`` not in ``allowed`` (sorted, each cut to
    ``NAME_SHOWN`` characters); ``what`` they are says the message ("query parameter")."""
    unknown = sorted({name for name in names if name not in allowed})
    if unknown:
        shown = [name[:NAME_SHOWN] for name in unknown]
        raise AppError(
            "UNKNOWN_FIELD",
            f"unknown {what}(s): {', '.join(shown)}",
            detail={"fields": shown, "allowed": sorted(allowed)},
        )


def query_check(names: Iterable[str], allowed: Collection[str]) -> None:
    """``names_check`` of a request's query parameters."""
    names_check(names, allowed, what="query parameter")


def query_parameters(*parameters: OpenApiParameter) -> Callable[[Handler], Handler]:
    """Declare a view method's query parameters (none: ``@query_parameters()``): documented in
    the schema (drf-spectacular merges them with the method's ``extend_schema``) and checked
    before the method runs (UNKNOWN_FIELD for any other)."""
    allowed = frozenset(p.name for p in parameters if p.location == OpenApiParameter.QUERY)

    def decorate(method: Handler) -> Handler:
        @functools.wraps(method)
        def checked(self: Any, request: Any, *args: Any, **kwargs: Any) -> Any:
            query_check(request.query_params.keys(), allowed)
            return method(self, request, *args, **kwargs)

        checked.query_parameters = allowed  # type: ignore[attr-defined]
        return extend_schema(parameters=list(parameters))(checked)  # type: ignore[return-value]

    return decorate


class QueryCheckedMetadata(SimpleMetadata):
    """DRF's OPTIONS answer under the same rule: it takes no query parameter."""

    def determine_metadata(self, request: Any, view: Any) -> Any:
        query_check(request.query_params.keys(), frozenset())
        return super().determine_metadata(request, view)
