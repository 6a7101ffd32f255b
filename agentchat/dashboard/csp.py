"""The dashboard's Content-Security-Policy: its pages load scripts, styles and connections
from this site only, run no inline script, embed nothing and are embedded nowhere; a message
that slipped past the sanitizer still could not load or run anything."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; frame-src 'none'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'"
)


class ContentSecurityPolicyMiddleware:
    """Sends POLICY with every page of the ``dashboard`` namespace."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        if match is not None and match.namespace == "dashboard":
            response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
