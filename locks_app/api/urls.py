from __future__ import annotations

from django.urls import path

from locks_app.api import views

urlpatterns = [
    path("channels/<str:name>/locks/", views.LockListCreateApi.as_view(), name="lock-list"),
    # Before <lock_id>/ so that "check", "fence" and "recover" are never taken for lock ids.
    path("channels/<str:name>/locks/check/", views.LockCheckApi.as_view(), name="lock-check"),
    path("channels/<str:name>/locks/fence/", views.LockFenceApi.as_view(), name="lock-fence"),
    path(
        "channels/<str:name>/locks/recover/",
        views.LockRecoverByPathApi.as_view(),
        name="lock-recover-by-path",
    ),
    path(
        "channels/<str:name>/locks/<str:lock_id>/",
        views.LockDetailApi.as_view(),
        name="lock-detail",
    ),
    path(
        "channels/<str:name>/locks/<str:lock_id>/recover/",
        views.LockRecoverApi.as_view(),
        name="lock-recover",
    ),
]
