"""Thin views: parse → service/selector → serialize. Errors are raised (agentchat.core.api)."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status as http
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.errors import AppError
from channels_app.selectors import channel_get
from tasks_app import selectors, services
from tasks_app.api import serializers as s

TAG = ["tasks"]


def _errors(description: str, *statuses: int) -> dict[int, OpenApiResponse]:
    return {
        status: OpenApiResponse(s.TaskErrorOutput, description=description) for status in statuses
    }


NOT_FOUND = "CHANNEL_NOT_FOUND, TASK_NOT_FOUND"
BAD_ID = "TASK_INVALID_ID (a malformed id in the path)"
LEASE_404 = NOT_FOUND + ", LEASE_NOT_FOUND"


def _task_response(task: Any, status: int = http.HTTP_200_OK) -> Response:
    return Response(selectors.task_to_dict(task), status=status)


class TaskListCreateApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_list",
        summary="List a channel's tasks with readiness",
        parameters=[
            OpenApiParameter("status", str, description="only tasks in this status"),
            OpenApiParameter("owner", str, description="only tasks of this owner"),
        ],
        responses={
            200: s.TaskListOutput,
            **_errors("TASK_INVALID_STATUS", 400),
            **_errors("CHANNEL_NOT_FOUND", 404),
        },
    )
    def get(self, request: Request, name: str) -> Response:
        channel = channel_get(name, viewer=request.user.name)
        tasks = selectors.task_list(
            channel=channel,
            status=request.query_params.get("status") or None,
            owner=request.query_params.get("owner") or None,
        )
        return Response({"tasks": selectors.tasks_to_dicts(tasks)})

    @extend_schema(
        tags=TAG,
        operation_id="task_create",
        summary="Create an open task (posts task.created)",
        request=s.TaskCreateInput,
        responses={
            201: s.TaskOutput,
            **_errors(
                "TASK_INVALID_ID, TASK_INVALID_TITLE, TASK_INVALID_OWNER, TASK_INVALID_BRANCH, "
                "TASK_INVALID_DEPENDS_ON, TASK_INVALID_DEPENDENCY_ID, TASK_DUPLICATE_DEPENDENCY, "
                "TASK_INVALID_FILES_HINT, TASK_PATH_OUTSIDE_WORKSPACE, TASK_INVALID_ACCEPTANCE, "
                "TASK_UNKNOWN_DEPENDENCY, TASK_UNKNOWN_FIELD, TASK_REQUIRED_FIELD_MISSING",
                400,
            ),
            **_errors("SENDER_MISMATCH (created_by is not the caller)", 403),
            **_errors("CHANNEL_NOT_FOUND", 404),
            **_errors("TASK_ALREADY_EXISTS, TASK_DEPENDENCY_CYCLE", 409),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        data = s.TaskCreateInput.validate_input(request.data)
        claimed = data.pop("created_by", None)
        if claimed is not None and claimed != request.user.name:
            raise AppError(
                "SENDER_MISMATCH",
                f"the token belongs to {request.user.name!r}, not {claimed!r}",
                detail={"created_by": claimed, "agent": request.user.name},
            )
        channel = channel_get(name, viewer=request.user.name)
        task = services.task_create(
            channel=channel, task_id=data.pop("id"), created_by=request.user.name, **data
        )
        return _task_response(task, http.HTTP_201_CREATED)


class TaskDetailApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_show",
        summary="Show a task with its lease and readiness",
        responses={200: s.TaskOutput, **_errors(BAD_ID, 400), **_errors(NOT_FOUND, 404)},
    )
    def get(self, request: Request, name: str, task_id: str) -> Response:
        return _task_response(
            selectors.task_get(channel=channel_get(name, viewer=request.user.name), task_id=task_id)
        )

    @extend_schema(
        tags=TAG,
        operation_id="task_update",
        summary="Update a task (posts task.updated; a leased task only by its owner, never its "
        "owner or status)",
        request=s.TaskUpdateInput,
        responses={
            200: s.TaskOutput,
            **_errors(
                "TASK_INVALID_UPDATE, TASK_INVALID_STATUS, the value codes of create, "
                "TASK_UNKNOWN_DEPENDENCY, TASK_UNKNOWN_FIELD, " + BAD_ID,
                400,
            ),
            **_errors("LEASE_OWNER_MISMATCH", 403),
            **_errors(NOT_FOUND, 404),
            **_errors(
                "TASK_INVALID_TRANSITION, TASK_DEPENDENCY_NOT_READY, TASK_DEPENDENCY_CYCLE, "
                "LEASE_RECOVERY_REQUIRED, LEASE_MUTATION_REQUIRED",
                409,
            ),
        },
    )
    def patch(self, request: Request, name: str, task_id: str) -> Response:
        data = s.TaskUpdateInput.validate_input(request.data)
        channel = channel_get(name, viewer=request.user.name)
        task = services.task_update(
            channel=channel, task_id=task_id, actor=request.user.name, **data
        )
        return _task_response(task)


LEASE_409 = "LEASE_RECOVERY_REQUIRED (expired), TASK_INVALID_TRANSITION"


class TaskClaimApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_claim",
        summary="Claim a ready task under a lease (posts lease.claimed)",
        request=s.LeaseDurationInput,
        responses={
            200: s.TaskOutput,
            **_errors("LEASE_INVALID_DURATION, LEASE_UNKNOWN_FIELD, " + BAD_ID, 400),
            **_errors(NOT_FOUND, 404),
            **_errors(
                "LEASE_CONFLICT (leased, or assigned to another agent), "
                "LEASE_RECOVERY_REQUIRED (an expired lease is never taken over), "
                "TASK_INVALID_TRANSITION, TASK_DEPENDENCY_NOT_READY",
                409,
            ),
        },
    )
    def post(self, request: Request, name: str, task_id: str) -> Response:
        data = s.LeaseDurationInput.validate_input(request.data)
        task = services.lease_claim(
            channel=channel_get(name, viewer=request.user.name),
            task_id=task_id,
            actor=request.user.name,
            **data,
        )
        return _task_response(task)


class TaskRenewApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_renew",
        summary="Renew the caller's unexpired lease (posts lease.renewed)",
        request=s.LeaseDurationInput,
        responses={
            200: s.TaskOutput,
            **_errors("LEASE_INVALID_DURATION, LEASE_UNKNOWN_FIELD, " + BAD_ID, 400),
            **_errors("LEASE_OWNER_MISMATCH", 403),
            **_errors(LEASE_404, 404),
            **_errors(LEASE_409, 409),
        },
    )
    def post(self, request: Request, name: str, task_id: str) -> Response:
        data = s.LeaseDurationInput.validate_input(request.data)
        task = services.lease_renew(
            channel=channel_get(name, viewer=request.user.name),
            task_id=task_id,
            actor=request.user.name,
            **data,
        )
        return _task_response(task)


class TaskDoneApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_done",
        summary="Complete a task: clears the caller's lease (lease.completed), or a plain "
        "in_progress -> done (task.updated, lease_fallback complete)",
        request=s.LeaseEmptyInput,
        responses={
            200: s.TaskOutput,
            **_errors("LEASE_UNKNOWN_FIELD, " + BAD_ID, 400),
            **_errors("LEASE_OWNER_MISMATCH", 403),
            **_errors(NOT_FOUND, 404),
            **_errors(LEASE_409 + ", TASK_DEPENDENCY_NOT_READY", 409),
        },
    )
    def post(self, request: Request, name: str, task_id: str) -> Response:
        s.LeaseEmptyInput.validate_input(request.data)
        task = services.lease_complete(
            channel=channel_get(name, viewer=request.user.name),
            task_id=task_id,
            actor=request.user.name,
        )
        return _task_response(task)


class TaskBlockApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_block",
        summary="Block a task (posts task.updated); a leased task cannot be blocked",
        request=s.TaskBlockInput,
        responses={
            200: s.TaskOutput,
            **_errors("TASK_UNKNOWN_FIELD, " + BAD_ID, 400),
            **_errors("LEASE_OWNER_MISMATCH", 403),
            **_errors(NOT_FOUND, 404),
            **_errors(LEASE_409 + ", LEASE_MUTATION_REQUIRED", 409),
        },
    )
    def post(self, request: Request, name: str, task_id: str) -> Response:
        s.TaskBlockInput.validate_input(request.data)
        task = services.task_block(
            channel=channel_get(name, viewer=request.user.name),
            task_id=task_id,
            actor=request.user.name,
        )
        return _task_response(task)


class TaskReleaseApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_release",
        summary="Release a task to open: clears the caller's lease (lease.released), or a "
        "plain transition (task.updated, lease_fallback release)",
        request=s.LeaseEmptyInput,
        responses={
            200: s.TaskOutput,
            **_errors("LEASE_UNKNOWN_FIELD, " + BAD_ID, 400),
            **_errors("LEASE_OWNER_MISMATCH", 403),
            **_errors(NOT_FOUND, 404),
            **_errors(LEASE_409, 409),
        },
    )
    def post(self, request: Request, name: str, task_id: str) -> Response:
        s.LeaseEmptyInput.validate_input(request.data)
        task = services.lease_release(
            channel=channel_get(name, viewer=request.user.name),
            task_id=task_id,
            actor=request.user.name,
        )
        return _task_response(task)


class TaskRecoverApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_recover",
        summary="Recover an expired lease: the caller becomes the owner (posts lease.recovered)",
        request=s.LeaseRecoverInput,
        responses={
            200: s.TaskOutput,
            **_errors(
                "LEASE_INVALID_REASON, LEASE_INVALID_DURATION, LEASE_INVALID_OWNER, "
                "LEASE_UNKNOWN_FIELD, " + BAD_ID,
                400,
            ),
            **_errors(LEASE_404, 404),
            **_errors("LEASE_NOT_EXPIRED, TASK_INVALID_TRANSITION, TASK_DEPENDENCY_NOT_READY", 409),
        },
    )
    def post(self, request: Request, name: str, task_id: str) -> Response:
        data = s.LeaseRecoverInput.validate_input(request.data)
        task = services.lease_recover(
            channel=channel_get(name, viewer=request.user.name),
            task_id=task_id,
            actor=request.user.name,
            reason=data.pop("reason", None),
            **data,
        )
        return _task_response(task)


class TaskRecoverPendingApi(APIView):
    @extend_schema(
        tags=TAG,
        operation_id="task_recover_pending",
        summary="Always 409 LEASE_TRANSACTION_NOT_FOUND: mutations commit with their audit "
        "message in one transaction, so nothing is ever pending",
        request=s.RecoverPendingInput,
        responses={
            **_errors("LEASE_UNKNOWN_FIELD", 400),
            **_errors("CHANNEL_NOT_FOUND", 404),
            **_errors("LEASE_TRANSACTION_NOT_FOUND", 409),
        },
    )
    def post(self, request: Request, name: str) -> Response:
        s.RecoverPendingInput.validate_input(request.data)
        services.lease_recover_pending(channel=channel_get(name, viewer=request.user.name))
