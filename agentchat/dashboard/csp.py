"""The dashboard's Content-Security-Policy: its pages load scripts, styles and connections
from this site only, run no inline script, embed nothing and are embedded nowhere; a message
that slipped past the sanitizer still could not load or run anything."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; object-src 'none'; frame-src 'none'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'self'"
)


class ContentSecurityPolicyMiddleware:
    """Sends POLICY with every page of the ``dashboard`` namespace. Sync and async (under ASGI
    a page then costs no thread hand-off here: ``agentchat.dashboard.budget``)."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Callable[[HttpRequest], Any]) -> None:
        self.get_response = get_response
        self.is_async = iscoroutinefunction(get_response)
        if self.is_async:
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if self.is_async:
            return self._acall(request)
        return self._policy(request, self.get_response(request))

    async def _acall(self, request: HttpRequest) -> HttpResponse:
        return self._policy(request, await self.get_response(request))

    @staticmethod
    def _policy(request: HttpRequest, response: HttpResponse) -> HttpResponse:
        match = getattr(request, "resolver_match", None)
        if match is not None and match.namespace == "dashboard":
            response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
