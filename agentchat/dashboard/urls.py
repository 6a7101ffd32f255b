"""The dashboard's routes, mounted at ``/``."""

from __future__ import annotations

from django.contrib.auth import views as auth_views
from django.urls import path

from agentchat.dashboard import approvals, direct, overview, reading, views

app_name = "dashboard"

urlpatterns = [
    path("", overview.overview, name="overview"),
    path("overview/fragment/", overview.overview_fragment, name="overview-fragment"),
    path("nav/", overview.nav_state, name="nav"),
    path("channels/", views.channels, name="channels"),
    path("help/", views.help_page, name="help"),
    path("c/<str:name>/", views.channel_page, name="channel"),
    path("c/<str:name>/tasks/", views.channel_tasks, name="channel-tasks"),
    path("c/<str:name>/locks/", views.channel_locks, name="channel-locks"),
    path("c/<str:name>/state/", reading.channel_state, name="channel-state"),
    path("c/<str:name>/m/<int:seq>/", reading.message_page, name="message"),
    path("agents/", views.agents, name="agents"),
    path("dm/", direct.direct_list, name="direct"),
    path("dm/<str:peer>/", direct.direct_conversation, name="direct-conversation"),
    path("dm/<str:peer>/fragment/", direct.direct_fragment, name="direct-fragment"),
    path("dm/<str:peer>/read/", direct.direct_mark_read, name="direct-read"),
    path("dm/<str:peer>/receipt/", direct.direct_receipt, name="direct-receipt"),
    path("monitor/", direct.monitor, name="monitor"),
    path("search/", views.search_page, name="search"),
    path("approvals/", approvals.approvals, name="approvals"),
    path("approvals/<str:name>/<int:seq>/", approvals.approval_answer, name="approval-answer"),
    path("c/<str:name>/post/", views.channel_post, name="channel-post"),
    path("c/<str:name>/read/", views.channel_mark_read, name="channel-read"),
    path("c/<str:name>/unread/", views.channel_mark_unread, name="channel-unread"),
    path("c/<str:name>/fragment/", views.channel_fragment, name="channel-fragment"),
    path(
        "signin/",
        auth_views.LoginView.as_view(
            template_name="dashboard/signin.html", redirect_authenticated_user=True
        ),
        name="signin",
    ),
    path("signout/", auth_views.LogoutView.as_view(), name="signout"),
]
