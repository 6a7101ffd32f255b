"""Thin views: parse → service/selector → serialize. Errors are raised (agentchat.core.http.rest).

The request's shape first (unknown fields), then the channel, then its values, parsed in the
reference's order of checks (``locks_app.api.serializers``), then the service.

The caller (``request.user``, from the token) is the owner of what it locks, unlocks or
recovers.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status as http
from rest_framework.response import Response
from rest_framework.views import APIView

from agentchat.core.http import pages
from agentchat.core.http import schema as openapi
from agentchat.core.http.fence import FENCE_PARAMETER, FENCE_SCHEMA, FenceCheckOutput
from agentchat.core.http.query import query_parameters
from agentchat.core.http.schema import raises
from agentchat.core.identity.auth import AgentRequest
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.fence import FENCE_MAX, fence_query_parse
from agentchat.core.rules.records import Duration
from channels_app.selectors import channel_get
from locks_app import records, selectors, services
from locks_app.api import serializers as s

# The codes the views raise, in groups the operations share (statuses and meanings come from
# the error table: agentchat.core.http.schema).
PATHS = ("PATH_LOCK_INVALID_PATH", "PATH_LOCK_PATTERN_TOO_COMPLEX")
HELD = ("PATH_LOCK_CONFLICT", "PATH_LOCK_RECOVERY_REQUIRED")  # the paths overlap a lock
# Held patterns starting with a wildcard, or held paths: the caller's or the channel's caps (a
# lock, a recovery).
CAPPED = ("PATH_LOCK_TOO_MANY_PATTERNS", "PATH_LOCK_TOO_MANY_PATHS")
OWNED = ("PATH_LOCK_NOT_FOUND", "PATH_LOCK_OWNER_MISMATCH", "PATH_LOCK_CONFLICT")
RECOVER_CODES = (
    "PATH_LOCK_NOT_FOUND",
    "PATH_LOCK_INVALID_REASON",
    "PATH_LOCK_INVALID_DURATION",
    "PATH_LOCK_NOT_STALE",
    "PATH_LOCK_PATTERN_TOO_COMPLEX",
    *HELD,
    *CAPPED,
)


# The optional fence of an unlock (a query parameter: DELETE has no body).
UNLOCK_FENCE = OpenApiParameter(
    "fence",
    FENCE_SCHEMA,
    description="optional: the lock's fence the caller holds; not the current one: 409 "
    f"STALE_FENCE (ASCII digits from 0 to {FENCE_MAX}, else INVALID_FENCE)",
)
FENCED = ("INVALID_FENCE", "STALE_FENCE")


def _unlock_fence(request: AgentRequest) -> int | None:
    raw = request.query_params.get("fence")
    return None if raw is None else fence_query_parse(raw)


def _path_parameter(description: str) -> OpenApiParameter:
    return OpenApiParameter("path", openapi.WORKSPACE_PATH, required=True, description=description)


def _path_given(request: AgentRequest, how: str, *, action: str) -> str:
    """The ``path`` query parameter naming a lock. Raises PATH_LOCK_INVALID_PATH (none)."""
    path = request.query_params.get("path")
    if path is None:
        raise AppError(
            "PATH_LOCK_INVALID_PATH",
            f"name the lock to {action}: {how}",
            detail={"field": "path"},
        )
    return str(path)


ADVISORY_HEADER = "AgentChat-Path-Locks"
ADVISORY = "advisory: a lock stops no write; agents (and the git guard) check before they write"


class LockApiView(APIView):
    """Every answer of the path-lock API says that locks are advisory (a header, so the lock
    records stay the reference's)."""

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response[ADVISORY_HEADER] = ADVISORY
        return response


class LockListCreateApi(LockApiView):
    heavy_methods = ("GET",)  # agentchat.core.db.heavy

    @extend_schema(
        operation_id="locks_list",
        responses=s.LockListOutput,
        extensions=raises("INVALID_VALUE", "PATH_LOCK_INVALID_LOCK_ID"),
        summary="List the channel's path locks (expired too), a page at a time (by lock id)",
    )
    @query_parameters(
        *openapi.page_parameters(
            openapi.record_id(selectors.LOCK_ID_MAX), "the lock id of the previous page's `next`"
        )
    )
    def get(self, request: AgentRequest, name: str) -> HttpResponse:
        after, limit = pages.window_parse(request.query_params, selectors.lock_id_check)
        channel = channel_get(name, viewer=request.user.name)
        return pages.page_response(
            "locks", selectors.lock_page(channel=channel, after=after, limit=limit)
        )

    @extend_schema(
        operation_id="locks_lock",
        extensions=raises("UNKNOWN_FIELD", *PATHS, "PATH_LOCK_INVALID_DURATION", *HELD, *CAPPED),
        request=s.LockCreateInput,
        responses={201: s.LockOutput},
        summary="Lock workspace paths (all or none)",
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        data = s.LockCreateInput.validate_input(request.data)
        channel = channel_get(name, viewer=request.user.name)
        lock = services.lock_acquire(
            channel=channel,
            owner=request.user.name,
            paths=selectors.lock_paths_parse(data["paths"]),
            lease_seconds=Duration.parse(data["lease_seconds"]),
        )
        return Response(records.lock_api_dict(lock), status=http.HTTP_201_CREATED)

    @extend_schema(
        operation_id="locks_unlock_by_path",
        extensions=raises("PATH_LOCK_INVALID_PATH", *OWNED, *FENCED),
        responses={200: s.LockOutput},
        summary="Unlock the lock holding this exact normalized path (owner only)",
    )
    @query_parameters(_path_parameter("an exact normalized path"), UNLOCK_FENCE)
    def delete(self, request: AgentRequest, name: str) -> Response:
        path = _path_given(
            request, "DELETE …/locks/<lock_id>/ or …/locks/?path=<path>", action="unlock"
        )
        fence = _unlock_fence(request)
        channel = channel_get(name, viewer=request.user.name)
        record = services.lock_release(
            channel=channel, owner=request.user.name, path=path, fence=fence
        )
        return Response(record)


class LockCheckApi(LockApiView):
    heavy = True  # agentchat.core.db.heavy

    @extend_schema(
        operation_id="locks_check",
        extensions=raises("UNKNOWN_FIELD", *PATHS, "PATH_LOCK_CONFLICT"),
        request=s.LockCheckInput,
        responses=s.LockCheckOutput,
        summary="List the locks (active and expired) overlapping these paths",
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        data = s.LockCheckInput.validate_input(request.data)
        channel = channel_get(name, viewer=request.user.name)
        answer = selectors.lock_check(
            channel=channel, paths=selectors.lock_paths_parse(data["paths"])
        )
        return Response(answer)


class LockDetailApi(LockApiView):
    @extend_schema(
        operation_id="locks_show",
        extensions=raises("PATH_LOCK_INVALID_LOCK_ID", "PATH_LOCK_NOT_FOUND"),
        responses=s.LockOutput,
        summary="Show a lock record",
    )
    @query_parameters()
    def get(self, request: AgentRequest, name: str, lock_id: str) -> Response:
        lock = selectors.lock_get(
            channel=channel_get(name, viewer=request.user.name), lock_id=lock_id
        )
        return Response(records.lock_api_dict(lock))

    @extend_schema(
        operation_id="locks_unlock",
        extensions=raises("PATH_LOCK_INVALID_LOCK_ID", *OWNED, *FENCED),
        responses={200: s.LockOutput},
        summary="Unlock (owner only, even when expired)",
    )
    @query_parameters(UNLOCK_FENCE)
    def delete(self, request: AgentRequest, name: str, lock_id: str) -> Response:
        fence = _unlock_fence(request)
        channel = channel_get(name, viewer=request.user.name)
        record = services.lock_release(
            channel=channel, owner=request.user.name, lock_id=lock_id, fence=fence
        )
        return Response(record)


def _recovered(
    request: AgentRequest,
    name: str,
    data: dict[str, Any],
    *,
    lock_id: str | None = None,
    path: str | None = None,
) -> Response:
    """A recovery of the lock named by ``lock_id`` or by one of its paths: the channel, then
    the reason and the lease judged, then the lock taken over."""
    channel = channel_get(name, viewer=request.user.name)
    lock = services.lock_recover(
        channel=channel,
        owner=request.user.name,
        reason=services.lock_reason_check(data["reason"]),
        lease_seconds=Duration.parse(data["lease_seconds"]),
        lock_id=lock_id,
        path=path,
    )
    return Response(records.lock_api_dict(lock))


class LockRecoverApi(LockApiView):
    @extend_schema(
        operation_id="locks_recover",
        extensions=raises("UNKNOWN_FIELD", "PATH_LOCK_INVALID_LOCK_ID", *RECOVER_CODES),
        request=s.LockRecoverInput,
        responses=s.LockOutput,
        summary="Take over an expired lock (the caller becomes its owner)",
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str, lock_id: str) -> Response:
        data = s.LockRecoverInput.validate_input(request.data)
        return _recovered(request, name, data, lock_id=lock_id)


class LockRecoverByPathApi(LockApiView):
    @extend_schema(
        operation_id="locks_recover_by_path",
        extensions=raises("UNKNOWN_FIELD", "PATH_LOCK_INVALID_PATH", *RECOVER_CODES),
        request=s.LockRecoverByPathInput,
        responses=s.LockOutput,
        summary="Take over the expired lock holding this exact normalized path",
        description=(
            "As `POST locks/<lock_id>/recover/`, the lock named by one of its paths as "
            "`DELETE locks/?path=` names it: the record holding that exact normalized path "
            "(PATH_LOCK_NOT_FOUND when none does, or when the path does not normalize; "
            "PATH_LOCK_CONFLICT, with `lock_ids`, when several do). The reason is judged "
            "before the lock is looked up, as in the reference."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> Response:
        data = s.LockRecoverByPathInput.validate_input(request.data)
        path = data["path"]
        if not isinstance(path, str):
            raise AppError(
                "PATH_LOCK_INVALID_PATH",
                "name the lock to recover by one of its paths: a string",
                detail={"field": "path"},
            )
        return _recovered(request, name, data, path=path)


class LockFenceApi(LockApiView):
    @extend_schema(
        operation_id="locks_fence_check",
        extensions=raises("INVALID_FENCE", "PATH_LOCK_INVALID_PATH", "PATH_LOCK_CONFLICT"),
        responses=FenceCheckOutput,
        summary="Whether a fence is current for the lock holding this exact path (for a third "
        "system: a CI job, a deploy script)",
        description="`state` is `current` when `fence` is the fence of the unexpired lock "
        "holding `path` (an exact normalized path or pattern, as unlock names a lock); "
        "`expired` when it is that lock's fence but the lock expired, or no lock holds the "
        "path now and the channel handed that fence out (its lock ended); `stale` otherwise "
        "(a newer lock or recovery holds the path). Readable by the channel's members.",
    )
    @query_parameters(
        _path_parameter("an exact normalized path or pattern of the lock"), FENCE_PARAMETER
    )
    def get(self, request: AgentRequest, name: str) -> Response:
        path = _path_given(request, "…/locks/fence/?path=<path>&fence=<fence>", action="check")
        fence = fence_query_parse(request.query_params.get("fence"))
        channel = channel_get(name, viewer=request.user.name)
        return Response(selectors.lock_fence_state(channel=channel, path=path, fence=fence))
