from typing import Any

from django.urls import re_path

from channels_app.endpoints import MessageStreamEndpoint, MultiplexEndpoint, WaitEndpoint
from channels_app.endpoints.sse import FollowRouter, InboxFollowEndpoint, MonitorFollowEndpoint

http_urlpatterns = [
    re_path(r"^api/v1/channels/(?P<name>[^/]+)/wait/$", WaitEndpoint.as_asgi()),
]
websocket_urlpatterns = [
    re_path(r"^ws/channels/$", MultiplexEndpoint.as_asgi()),
    re_path(r"^ws/channels/(?P<name>[^/]+)/$", MessageStreamEndpoint.as_asgi()),
]


def follow_urlpatterns(lane: Any) -> list[Any]:
    """HTTP v1's live follows (Server-Sent Events); the JSON replays of the same paths go on
    to ``lane``."""
    return [
        re_path(
            r"^v1/agents/(?P<agent_id>[^/]+)/inbox$", FollowRouter(InboxFollowEndpoint(), lane)
        ),
        re_path(r"^v1/monitor$", FollowRouter(MonitorFollowEndpoint(), lane)),
    ]
