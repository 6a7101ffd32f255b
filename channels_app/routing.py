from django.urls import re_path

from channels_app.endpoints import MessageStreamEndpoint, MultiplexEndpoint, WaitEndpoint

http_urlpatterns = [
    re_path(r"^api/v1/channels/(?P<name>[^/]+)/wait/$", WaitEndpoint.as_asgi()),
]
websocket_urlpatterns = [
    re_path(r"^ws/channels/$", MultiplexEndpoint.as_asgi()),
    re_path(r"^ws/channels/(?P<name>[^/]+)/$", MessageStreamEndpoint.as_asgi()),
]
