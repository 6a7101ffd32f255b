"""URL routes. The wait long-poll and websockets are routed in asgi.py, before Django."""

from __future__ import annotations

import sys

from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern, URLResolver, include, path

from agentchat import views
from agentchat.core.db.faults import fault_or_internal
from agentchat.core.http.me import MeApi
from agentchat.core.http.schema_views import RedocPage, SchemaApi, SwaggerPage
from agentchat.core.rules.errors import AppError, error_http_response, internal_error
from agentchat.state import api as state_api

admin.site.site_header = "AgentChat administration"
admin.site.site_title = "AgentChat admin"
admin.site.index_title = "Agents, channels, tasks and locks"

api_v1: list[URLPattern | URLResolver] = [
    path("me/", MeApi.as_view(), name="me"),
    path("", include("channels_app.api.urls")),
    path("", include("tasks_app.api.urls")),
    path("", include("locks_app.api.urls")),
    path("channels/<str:name>/state/", state_api.StateApi.as_view(), name="channel-state"),
    path(
        "channels/<str:name>/state/snapshot/",
        state_api.SnapshotApi.as_view(),
        name="channel-state-snapshot",
    ),
    path("channels/<str:name>/compact/", state_api.CompactApi.as_view(), name="channel-compact"),
    path("schema/", SchemaApi.as_view(), name="schema"),
    path("docs/", SwaggerPage.as_view(url_name="schema"), name="api-docs"),
    path("redoc/", RedocPage.as_view(url_name="schema"), name="api-redoc"),
]

urlpatterns = [
    path("", include("agentchat.dashboard.urls")),
    path("admin/", admin.site.urls),
    path("api/v1/", include(api_v1)),
    # HTTP v1 (the Agent Chat protocol v1 document): direct messages, inboxes, the monitor.
    path("v1/", include("channels_app.api.v1.urls")),
]


def handler404(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if request.path.startswith(("/api/", "/v1/")):
        return error_http_response(AppError("NOT_FOUND", f"no API route {request.path}"))
    return views.not_found(request)


def handler500(request: HttpRequest) -> HttpResponse:
    if request.path.startswith(("/api/", "/v1/")):
        error = sys.exc_info()[1]  # Django calls this inside its except block
        return error_http_response(internal_error() if error is None else fault_or_internal(error))
    return HttpResponse("Internal server error", status=500, content_type="text/plain")
