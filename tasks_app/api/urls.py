from __future__ import annotations

from django.urls import path

from tasks_app.api import views

TASK = "channels/<str:name>/tasks/<str:task_id>/"

urlpatterns = [
    path("channels/<str:name>/tasks/", views.TaskListCreateApi.as_view(), name="task-list"),
    # Before <task_id>: "recover-pending" is not a task id.
    path(
        "channels/<str:name>/tasks/recover-pending/",
        views.TaskRecoverPendingApi.as_view(),
        name="task-recover-pending",
    ),
    path(TASK, views.TaskDetailApi.as_view(), name="task-detail"),
    path(TASK + "claim/", views.TaskClaimApi.as_view(), name="task-claim"),
    path(TASK + "renew/", views.TaskRenewApi.as_view(), name="task-renew"),
    path(TASK + "done/", views.TaskDoneApi.as_view(), name="task-done"),
    path(TASK + "block/", views.TaskBlockApi.as_view(), name="task-block"),
    path(TASK + "release/", views.TaskReleaseApi.as_view(), name="task-release"),
    path(TASK + "recover/", views.TaskRecoverApi.as_view(), name="task-recover"),
    path(TASK + "fence/", views.TaskFenceApi.as_view(), name="task-fence"),
]
