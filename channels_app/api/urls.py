from __future__ import annotations

from typing import Any

from django.urls import URLPattern, path

from channels_app.api import agents, views


def with_and_without_slash(route: str, view: Any, name: str) -> list[URLPattern]:
    """The route and its spelling without the trailing slash (the registry's paths take both;
    the schema lists the first)."""
    return [
        path(route, view.as_view(), name=name),
        path(route.removesuffix("/"), view.as_view(schema=None)),
    ]


urlpatterns = [
    *with_and_without_slash("agents/", agents.AgentListApi, "agents-list"),
    *with_and_without_slash("agents/register/", agents.AgentRegisterApi, "agents-register"),
    *with_and_without_slash("agents/heartbeat/", agents.AgentHeartbeatApi, "agents-heartbeat"),
    *with_and_without_slash("agents/idle/", agents.AgentIdleApi, "agents-idle"),
    path("channels/", views.ChannelListCreateApi.as_view(), name="channel-list"),
    path("approvals/", views.ApprovalsApi.as_view(), name="approvals"),
    path("search/", views.SearchApi.as_view(), name="search"),
    path("channels/<str:name>/", views.ChannelDetailApi.as_view(), name="channel-detail"),
    path(
        "channels/<str:name>/messages/", views.MessageListPostApi.as_view(), name="channel-messages"
    ),
    path("channels/<str:name>/read/", views.MessageReadApi.as_view(), name="channel-read"),
    path("channels/<str:name>/ack/", views.CursorAckApi.as_view(), name="channel-ack"),
    path("channels/<str:name>/events/", views.EventListPostApi.as_view(), name="channel-events"),
    path("channels/<str:name>/presence/", views.PresenceApi.as_view(), name="channel-presence"),
    path(
        "channels/<str:name>/claims/<str:marker>/",
        views.MarkerClaimApi.as_view(),
        name="channel-claim",
    ),
]
