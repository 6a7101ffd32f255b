"""The HTTP v1 routes, under ``/v1/`` (the document's paths: no trailing slash)."""

from django.urls import path

from channels_app.api.v1 import views

AGENT = "agents/<str:agent_id>/"

urlpatterns = [
    path(f"{AGENT}messages", views.EnvelopeSendApi.as_view(), name="v1-messages"),
    path(f"{AGENT}inbox", views.InboxApi.as_view(), name="v1-inbox"),
    path(f"{AGENT}receipts", views.ReceiptSendApi.as_view(), name="v1-receipts"),
    path(f"{AGENT}contacts", views.ContactListApi.as_view(), name="v1-contacts"),
    path(f"{AGENT}contacts/<str:contact_id>", views.ContactApi.as_view(), name="v1-contact"),
    path(f"{AGENT}contact-shares", views.ContactShareApi.as_view(), name="v1-contact-shares"),
    path(
        f"{AGENT}contact-shares/<str:message_id>/accept",
        views.ContactShareAcceptApi.as_view(),
        name="v1-contact-share-accept",
    ),
    path(f"{AGENT}address-book", views.AddressBookApi.as_view(), name="v1-address-book"),
    path("monitor", views.MonitorApi.as_view(), name="v1-monitor"),
]
