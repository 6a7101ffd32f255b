from django.urls import path

from channels_app.api import views

urlpatterns = [
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
