"""Thin views: parse → service/selector → serialize. Errors are raised
(agentchat.core.http.rest)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http import pages
from agentchat.core.http import schema as openapi
from agentchat.core.http.fence import FENCE_PARAMETER, FenceCheckOutput
from agentchat.core.http.query import query_parameters
from agentchat.core.http.rest import StrictSerializer
from agentchat.core.http.schema import raises
from agentchat.core.identity.auth import AgentRequest, sender_check
from agentchat.core.rules.fence import fence_body_parse, fence_query_parse
from channels_app.selectors import channel_get
from tasks_app import selectors, services
from tasks_app.api import serializers as s
from tasks_app.models import TASK_ID_MAX, Task
from tasks_app.selectors import STATUSES

TAG = ["tasks"]


# The codes the views raise, in groups the operations share (statuses and meanings come from
# the error table: agentchat.core.http.schema).
TASK = ("TASK_INVALID_ID", "TASK_NOT_FOUND", "TASK_CONFLICT")  # a task named in the path
INPUT = ("TASK_UNKNOWN_FIELD", "TASK_REQUIRED_FIELD_MISSING")
LEASE_INPUT = ("LEASE_UNKNOWN_FIELD", "LEASE_REQUIRED_FIELD_MISSING")
VALUES = (
    "TASK_INVALID_TITLE",
    "TASK_INVALID_OWNER",
    "TASK_INVALID_BRANCH",
    "TASK_INVALID_DEPENDS_ON",
    "TASK_INVALID_DEPENDENCY_ID",
    "TASK_DUPLICATE_DEPENDENCY",
    "TASK_INVALID_FILES_HINT",
    "TASK_PATH_OUTSIDE_WORKSPACE",
    "TASK_INVALID_ACCEPTANCE",
    "TASK_UNKNOWN_DEPENDENCY",
    "FIELD_TOO_LARGE",
)
# A leased task: only its owner acts, an expired lease is recovered first.
LEASED = ("LEASE_OWNER_MISMATCH", "LEASE_RECOVERY_REQUIRED", "TASK_INVALID_TRANSITION")
# An owned, unleased task: only its owner, its creator or the channel's maintainer change it.
OWNED = ("TASK_NOT_OWNER",)
# A holder's mutation carrying the fence it holds (agentchat.core.rules.fence).
FENCED = ("INVALID_FENCE", "STALE_FENCE")


def _task_response(task: Task, status: int = http.HTTP_200_OK) -> Response:
    return Response(selectors.task_to_dict(task), status=status)


class TaskListCreateApi(APIView):
    heavy_methods = ("GET",)  # agentchat.core.db.heavy

    @extend_schema(
        tags=TAG,
        operation_id="task_list",
        summary="List a channel's tasks with readiness, a page at a time (by id)",
        responses=s.TaskListOutput,
        extensions=raises(
            "TASK_INVALID_STATUS", "TASK_INVALID_OWNER", "TASK_INVALID_ID", "INVALID_VALUE"
        ),
    )
    @query_parameters(
        OpenApiParameter(
            "status",
            {"type": "string", "enum": list(STATUSES)},
            description="only tasks in this status",
        ),
        OpenApiParameter("owner", openapi.AGENT_NAME, description="only tasks of this owner"),
        *openapi.page_parameters(
            openapi.record_id(TASK_ID_MAX), "the task id of the previous page's `next`"
        ),
    )
    def get(self, request: AgentRequest, name: str) -> HttpResponse:
        after, limit = pages.window_parse(request.query_params, selectors.task_after_check)
        channel = channel_get(name, viewer=request.user.name)
        page = selectors.task_page(
            channel=channel,
            status=request.query_params.get("status") or None,
            owner=request.query_params.get("owner") or None,
            after=after,
            limit=limit,
        )
        return pages.page_response("tasks", page)

    @extend_schema(
        tags=TAG,
        operation_id="task_create",
        summary="Create an open task (posts task.created)",
        request=s.TaskCreateInput,
        responses={201: s.TaskOutput},
        extensions=raises(
            *INPUT,
            "TASK_INVALID_ID",
            *VALUES,
            "SENDER_MISMATCH",
            "TASK_ALREADY_EXISTS",
            "TASK_DEPENDENCY_CYCLE",
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        data = s.TaskCreateInput.validate_input(request.data)
        sender_check(request, data.pop("created_by", None), field="created_by")
        channel = channel_get(name, viewer=request.user.name)
        task = services.task_create(
            channel=channel, created_by=request.user.name, **s.TaskCreateInput.parse(data)
        )
        return _task_response(task, http.HTTP_201_CREATED)


class TaskDetailApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_show",
        summary="Show a task with its lease and readiness",
        responses=s.TaskOutput,
        extensions=raises("TASK_INVALID_ID", "TASK_NOT_FOUND"),
    )
    @query_parameters()
    def get(self, request: AgentRequest, name: str, task_id: str) -> Response:
        return _task_response(
            selectors.task_get(channel=channel_get(name, viewer=request.user.name), task_id=task_id)
        )

    @extend_schema(
        tags=TAG,
        operation_id="task_update",
        summary="Update a task (posts task.updated; a leased task only by its owner, never its "
        "owner or status)",
        request=s.TaskUpdateInput,
        responses=s.TaskOutput,
        extensions=raises(
            *INPUT,
            *TASK,
            *VALUES,
            *LEASED,
            *OWNED,
            "TASK_INVALID_UPDATE",
            "TASK_INVALID_STATUS",
            "TASK_DEPENDENCY_NOT_READY",
            "TASK_DEPENDENCY_CYCLE",
            "LEASE_MUTATION_REQUIRED",
        ),
    )
    @query_parameters()
    def patch(self, request: AgentRequest, name: str, task_id: str) -> Response:
        data = s.TaskUpdateInput.validate_input(request.data)
        channel = channel_get(name, viewer=request.user.name)
        task = services.task_update(
            channel=channel,
            task_id=task_id,
            actor=request.user.name,
            changes=s.TaskUpdateInput.parse(data),
        )
        return _task_response(task)


# A verb on the task named in the path, by the caller: the body checked by ``body``, the
# channel looked up, then ``arguments`` parses the body into the service's keyword arguments
# (a duration, a reason, the fence the caller holds) and the service is called; the task as it
# is after is the answer. (A comment, not a docstring: a view's docstring would become every
# operation's description.)
class _TaskActionApi(APIView):
    body: type[StrictSerializer]
    service: Callable[..., Task]
    arguments: Callable[[dict[str, Any]], dict[str, Any]]

    def post(self, request: AgentRequest, name: str, task_id: str) -> Response:
        data = self.body.validate_input(request.data)
        channel = channel_get(name, viewer=request.user.name)
        arguments = type(self).arguments(data)
        task = type(self).service(
            channel=channel, task_id=task_id, actor=request.user.name, **arguments
        )
        return _task_response(task)


def _task_action(
    name: str,
    service: Callable[..., Task],
    *,
    arguments: Callable[[dict[str, Any]], dict[str, Any]] = lambda data: {},
    operation: str,
    summary: str,
    body: type[StrictSerializer],
    codes: tuple[str, ...],
) -> type[_TaskActionApi]:
    """The view of a task verb (the module's comment above ``_TaskActionApi``)."""

    class TaskActionApi(_TaskActionApi):
        @extend_schema(
            tags=TAG,
            operation_id=operation,
            summary=summary,
            request=body,
            responses=s.TaskOutput,
            extensions=raises(*codes),
        )
        @query_parameters()
        def post(self, request: AgentRequest, name: str, task_id: str) -> Response:
            return super().post(request, name, task_id)

    TaskActionApi.body = body
    TaskActionApi.service = staticmethod(service)
    TaskActionApi.arguments = staticmethod(arguments)
    TaskActionApi.__name__ = TaskActionApi.__qualname__ = name
    return TaskActionApi


def _fenced(data: dict[str, Any]) -> dict[str, Any]:
    return {"fence": fence_body_parse(data)}


TaskClaimApi = _task_action(
    "TaskClaimApi",
    services.lease_claim,
    arguments=lambda data: {"duration": s.LeaseClaimInput.parse(data)},
    operation="task_claim",
    summary="Claim a ready task under a lease, with the task's next fence (posts lease.claimed)",
    body=s.LeaseClaimInput,
    codes=(
        *LEASE_INPUT,
        *TASK,
        "LEASE_INVALID_DURATION",
        "LEASE_CONFLICT",
        "LEASE_RECOVERY_REQUIRED",
        "TASK_INVALID_TRANSITION",
        "TASK_DEPENDENCY_NOT_READY",
    ),
)
TaskRenewApi = _task_action(
    "TaskRenewApi",
    services.lease_renew,
    arguments=lambda data: {**_fenced(data), "duration": s.LeaseDurationInput.parse(data)},
    operation="task_renew",
    summary="Renew the caller's unexpired lease, keeping its fence (posts lease.renewed)",
    body=s.LeaseDurationInput,
    codes=(*LEASE_INPUT, *TASK, *FENCED, *LEASED, "LEASE_INVALID_DURATION", "LEASE_NOT_FOUND"),
)
TaskDoneApi = _task_action(
    "TaskDoneApi",
    services.lease_complete,
    arguments=_fenced,
    operation="task_done",
    summary="Complete a task: clears the caller's lease (lease.completed), or a plain "
    "in_progress -> done (task.updated, lease_fallback complete)",
    body=s.LeaseEmptyInput,
    codes=(*LEASE_INPUT, *TASK, *FENCED, *LEASED, *OWNED, "TASK_DEPENDENCY_NOT_READY"),
)
TaskBlockApi = _task_action(
    "TaskBlockApi",
    services.task_block,
    operation="task_block",
    summary="Block a task (posts task.updated); a leased task cannot be blocked",
    body=s.TaskBlockInput,
    codes=(*INPUT, *TASK, *LEASED, *OWNED, "LEASE_MUTATION_REQUIRED"),
)
TaskReleaseApi = _task_action(
    "TaskReleaseApi",
    services.lease_release,
    arguments=_fenced,
    operation="task_release",
    summary="Release a task to open: clears the caller's lease (lease.released), or a "
    "plain transition (task.updated, lease_fallback release)",
    body=s.LeaseEmptyInput,
    codes=(*LEASE_INPUT, *TASK, *FENCED, *LEASED, *OWNED),
)
TaskRecoverApi = _task_action(
    "TaskRecoverApi",
    services.lease_recover,
    arguments=lambda data: dict(s.LeaseRecoverInput.parse(data)),
    operation="task_recover",
    summary="Recover an expired lease: the caller becomes the owner, under the task's next "
    "fence (posts lease.recovered)",
    body=s.LeaseRecoverInput,
    codes=(
        *LEASE_INPUT,
        *TASK,
        "LEASE_INVALID_REASON",
        "LEASE_INVALID_DURATION",
        "LEASE_INVALID_OWNER",
        "LEASE_NOT_FOUND",
        "LEASE_NOT_EXPIRED",
        "TASK_INVALID_TRANSITION",
        "TASK_DEPENDENCY_NOT_READY",
    ),
)


class TaskRecoverPendingApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_recover_pending",
        summary="Always 409 LEASE_TRANSACTION_NOT_FOUND: mutations commit with their audit "
        "message in one transaction, so nothing is ever pending",
        request=s.RecoverPendingInput,
        responses={},
        extensions=raises(*LEASE_INPUT, "LEASE_TRANSACTION_NOT_FOUND"),
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        s.RecoverPendingInput.validate_input(request.data)
        services.lease_recover_pending(channel=channel_get(name, viewer=request.user.name))


class TaskFenceApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_fence_check",
        summary="Whether a fence is the task's current one (for a third system: a CI job, a "
        "deploy script)",
        description="`state` is `current` when `fence` is the fence of the task's live, "
        "unexpired lease; `expired` when it is the task's latest fence but that lease expired "
        "or ended; `stale` for any other value (a newer claim or recovery happened). Readable "
        "by the channel's members, as the task is.",
        responses=FenceCheckOutput,
        extensions=raises("INVALID_FENCE", "TASK_INVALID_ID", "TASK_NOT_FOUND"),
    )
    @query_parameters(FENCE_PARAMETER)
    def get(self, request: AgentRequest, name: str, task_id: str) -> Response:
        fence = fence_query_parse(request.query_params.get("fence"))
        task = selectors.task_get(
            channel=channel_get(name, viewer=request.user.name), task_id=task_id
        )
        return Response(selectors.task_fence_state(task, fence))
