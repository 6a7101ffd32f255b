"""The schema and documentation pages (drf-spectacular's views) under the one query-parameter
rule of the API (``agentchat.core.http.query``): each takes the parameters drf-spectacular reads and
refuses any other. They stay out of the document they serve."""

from __future__ import annotations

from typing import Any, cast

from drf_spectacular.utils import OpenApiParameter, extend_schema
from drf_spectacular.views import (
    SpectacularAPIView,
    SpectacularRedocView,
    SpectacularSwaggerView,
)
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http.query import query_parameters

# Read by drf-spectacular's views: the document's language and API version.
LANG = OpenApiParameter("lang", str)
VERSION = OpenApiParameter("version", str)
# DRF's renderer override (URL_FORMAT_OVERRIDE): json or yaml.
FORMAT = OpenApiParameter("format", str)


class _JSONErrors(APIView):
    """Errors, and DRF's OPTIONS answer, in the API's JSON, whatever the page renders otherwise
    (YAML, HTML: the HTML renderer has no template for them and failed with a 500)."""

    def _as_json(self) -> None:
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type

    def handle_exception(self, exc: Exception) -> Response:
        self._as_json()
        return super().handle_exception(exc)

    # DRF's stubs take a Request where Django's View takes an HttpRequest: DRF's own override.
    def options(self, request: Request, *args: Any, **kwargs: Any) -> Response:  # type: ignore[override]
        self._as_json()
        return super().options(request, *args, **kwargs)


# drf-spectacular's views are untyped: their get answers a Response.
class SchemaApi(_JSONErrors, SpectacularAPIView):
    @extend_schema(exclude=True)
    @query_parameters(FORMAT, LANG, VERSION)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return cast(Response, super().get(request, *args, **kwargs))  # type: ignore[no-untyped-call]


class SwaggerPage(_JSONErrors, SpectacularSwaggerView):
    @extend_schema(exclude=True)
    @query_parameters(LANG, VERSION)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return cast(Response, super().get(request, *args, **kwargs))  # type: ignore[no-untyped-call]


class RedocPage(_JSONErrors, SpectacularRedocView):
    @extend_schema(exclude=True)
    @query_parameters(LANG, VERSION)
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return cast(Response, super().get(request, *args, **kwargs))  # type: ignore[no-untyped-call]
