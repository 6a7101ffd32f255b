from django.urls import re_path

from channels_app.consumers import ChannelStreamConsumer, ChannelWaitConsumer

http_urlpatterns = [
    re_path(r"^api/v1/channels/(?P<name>[^/]+)/wait/$", ChannelWaitConsumer.as_asgi()),
]
websocket_urlpatterns = [
    re_path(r"^ws/channels/(?P<name>[^/]+)/$", ChannelStreamConsumer.as_asgi()),
]
