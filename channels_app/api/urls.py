from __future__ import annotations

from typing import Any

from django.urls import URLPattern, path
from rest_framework.views import APIView

from channels_app.api import agents, signals, views, whiteboard


def _both(route: str, view: type[APIView], name: str) -> list[URLPattern]:
    """``route`` (ending in a slash) and the same without it, which the OpenAPI document does not
    list (its view's ``schema`` is None): an EP-0118 client may spell the paths either way."""
    unlisted: type[APIView] = type(f"Unslashed{view.__name__}", (view,), {"schema": None})
    return [
        path(route, view.as_view(), name=name),
        path(route.removesuffix("/"), unlisted.as_view(), name=f"{name}-unslashed"),
    ]


urlpatterns: list[Any] = [
    *_both("agents/", agents.AgentListApi, "agents-list"),
    *_both("agents/register/", agents.AgentRegisterApi, "agents-register"),
    *_both("agents/heartbeat/", agents.AgentHeartbeatApi, "agents-heartbeat"),
    *_both("agents/idle/", agents.AgentIdleApi, "agents-idle"),
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
    *_both("channels/<str:name>/signals/", signals.SignalListPostApi, "channel-signals"),
    *_both("channels/<str:name>/signals/ack/", signals.SignalAckApi, "channel-signals-ack"),
    *_both("channels/<str:name>/whiteboard/", whiteboard.WhiteboardListApi, "channel-whiteboard"),
    *_both(
        "channels/<str:name>/whiteboard/<str:key>/",
        whiteboard.WhiteboardEntryApi,
        "channel-whiteboard-entry",
    ),
]
