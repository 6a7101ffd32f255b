from django.urls import re_path

from channels_app.consumers import (
    ChannelsStreamConsumer,
    ChannelStreamConsumer,
    ChannelWaitConsumer,
)

http_urlpatterns = [
    re_path(r"^api/v1/channels/(?P<name>[^/]+)/wait/$", ChannelWaitConsumer.as_asgi()),
]
websocket_urlpatterns = [
    re_path(r"^ws/channels/$", ChannelsStreamConsumer.as_asgi()),
    re_path(r"^ws/channels/(?P<name>[^/]+)/$", ChannelStreamConsumer.as_asgi()),
]
