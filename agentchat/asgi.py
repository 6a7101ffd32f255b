"""ASGI entry point: wait, the API lane and websockets are routed before Django (DESIGN §6)."""

from __future__ import annotations

import os
from typing import Any

from django.core.asgi import get_asgi_application

from agentchat.datadir import data_dir_prepare

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
# Any ASGI server starts here: the data folder and its secret key before the settings load.
data_dir_prepare()
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402  (needs the app registry)
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import re_path  # noqa: E402

from agentchat.core.http.asgi_http import target_refuse, websocket_refuse  # noqa: E402
from agentchat.core.http.lane import ApiLane  # noqa: E402
from agentchat.core.live.push import home_loop_set  # noqa: E402
from agentchat.core.live.transport import scope_with_raw_send  # noqa: E402
from channels_app import routing as channels_routing  # noqa: E402

lane = ApiLane()
router = ProtocolTypeRouter(
    {
        # The wait long-poll and HTTP v1's live follows (Server-Sent Events; their JSON replays
        # go on to the lane), then the token APIs (/api/ and /v1/) straight to their views,
        # then Django (the admin, pages, static files) with its middleware.
        "http": URLRouter(
            [
                *channels_routing.http_urlpatterns,
                *channels_routing.follow_urlpatterns(lane),
                re_path(r"^(?:api|v1)/", lane),
                re_path(r"", django_asgi_app),
            ]
        ),
        # Origin is checked in the live endpoints: agents' clients send none (DESIGN §6).
        # An unknown path (or one without its trailing slash) is refused at the handshake.
        "websocket": AuthMiddlewareStack(
            URLRouter([*channels_routing.websocket_urlpatterns, re_path(r"", websocket_refuse)])
        ),
    }
)


async def application(scope: dict[str, Any], receive: Any, send: Any) -> None:
    home_loop_set()  # pushes from threads this request starts go to this loop
    if scope["type"] in ("http", "websocket") and not scope.get("path", "").startswith("/"):
        # An absolute-form target (``GET http://other.example/api/…``) names a host that no
        # Host check would see, and matches no route: refused alike everywhere.
        await target_refuse(scope, receive, send)
        return
    # For flow control (agentchat.core.live.transport): websockets and event streams.
    if scope["type"] in ("http", "websocket"):
        scope = scope_with_raw_send(scope, send)
    await router(scope, receive, send)
