"""The state summary's REST views: the summary now (JSON or markdown), a compaction, the latest
compaction's snapshot. Same auth, visibility rule and errors as the channel API: the channel is
looked up with ``channels_app.selectors.channel_get`` as the caller, so a members-only channel
is a 404 CHANNEL_NOT_FOUND to a non-member, exactly as one that does not exist."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework import status as http
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.views import APIView

from agentchat.core.http.query import query_parameters
from agentchat.core.http.rest import StrictBooleanField, StrictSerializer
from agentchat.core.http.schema import raises
from agentchat.core.identity.auth import AgentRequest
from agentchat.core.rules.encode import json_bytes
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.records import ts_seconds
from agentchat.models import StateSnapshot
from agentchat.state import selectors, services
from agentchat.state.bounded import api_marker, summary_bounded
from agentchat.state.markdown import state_markdown
from agentchat.state.summary import summary_counts
from channels_app import whiteboard
from channels_app.api.whiteboard import WhiteboardEntryOutput
from channels_app.selectors import channel_get
from locks_app.api.serializers import LockOutput
from tasks_app.api.serializers import TaskRecordOutput

TAG = ["state"]
FORMATS = ("json", "md")
STRICT_WORDS = {"": False, "0": False, "false": False, "1": True, "true": True}
MARKDOWN = "text/markdown; charset=utf-8"
JSON = "application/json"


class MarkdownRenderer(BaseRenderer):
    """Names ``text/markdown`` for the negotiation; the markdown is sent as it is."""

    media_type = "text/markdown"
    format = "md"
    charset = "utf-8"

    def render(self, data: Any, accepted_media_type: Any = None, renderer_context: Any = None):
        return data


class FormatNegotiation(DefaultContentNegotiation):
    """``?format=`` is the view's own parameter, not DRF's renderer override (which answers an
    unknown one with a bare 404): the view judges it (400 INVALID_VALUE). The Accept header is
    still honoured for the format asked for (406 NOT_ACCEPTABLE), and everything the view
    answers besides its markdown, errors included, is rendered as JSON."""

    def select_renderer(self, request: Request, renderers: Any, format_suffix: Any = None):
        wanted = request.query_params.get("format") or "json"
        if wanted in FORMATS:
            candidate = MarkdownRenderer() if wanted == "md" else JSONRenderer()
            super().select_renderer(request, [candidate], None)  # raises NotAcceptable
        return JSONRenderer(), JSONRenderer.media_type


def _params(request: AgentRequest, names: tuple[str, ...]) -> dict[str, str]:
    """The values of the query parameters ``names`` ("" when absent); the view's
    ``query_parameters`` refused any other."""
    return {name: request.query_params.get(name, "") for name in names}


def _format(params: dict[str, str]) -> str:
    value = params.get("format") or "json"
    if value not in FORMATS:
        raise AppError(
            "INVALID_VALUE",
            "format must be json or md",
            detail={"field": "format", "value": value[:40], "choices": list(FORMATS)},
        )
    return value


def _strict(params: dict[str, str]) -> bool:
    value = params.get("strict", "")
    if value not in STRICT_WORDS:
        raise AppError(
            "INVALID_VALUE",
            "strict must be 1, 0, true or false",
            detail={"field": "strict", "value": value[:40]},
        )
    return STRICT_WORDS[value]


def _sorted(value: Any) -> Any:
    """Keys sorted at every level, as the reference's ``state --json`` prints them."""
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


TRUNCATED_HEADER = "AgentChat-Truncated"  # "1" when a bounded answer shortened texts
Render = Callable[[dict[str, Any], bool], bytes]


def _bounded(
    summary: dict[str, Any], render: Render, *, status: int = http.HTTP_200_OK, media: str
) -> HttpResponse:
    """The answer ``render(summary, truncated)`` makes, within AGENTCHAT_STATE_MAX_BYTES
    (``agentchat.state.bounded``): as it is when it fits, else with its message texts
    shortened and the header ``AgentChat-Truncated: 1``. Raises STATE_TOO_LARGE."""
    body, truncated = summary_bounded(
        summary, render, max_bytes=settings.AGENTCHAT_STATE_MAX_BYTES, marker=api_marker
    )
    response = HttpResponse(body, status=status, content_type=media)
    if truncated:
        response[TRUNCATED_HEADER] = "1"
    return response


def _json_of(
    extra: dict[str, Any],
    *,
    summary_as: str = "fields",
    markdown: str | None = None,
    last: dict[str, Any] | None = None,
) -> Render:
    """A renderer of a JSON answer: ``extra`` and the summary (``summary_as``: its fields
    spread, ``"summary"``: under that key, ``""``: not at all), keys sorted at every level. With
    ``markdown`` (the stored one) the answer has it, or once shortened the shortened summary's;
    a shortened answer says ``"truncated": true``. ``last``: keys put after the sorted ones,
    their values as they are (the whiteboard's, whose own keys keep their order)."""

    def render(summary: dict[str, Any], truncated: bool) -> bytes:
        data = dict(extra)
        if summary_as == "fields":
            data.update(summary)
        elif summary_as:
            data[summary_as] = summary
        if markdown is not None:
            data["markdown"] = state_markdown(summary) if truncated else markdown
        if truncated:
            data["truncated"] = True
        return json_bytes({**_sorted(data), **(last or {})})

    return render


def _markdown_of(markdown: str | None = None) -> Render:
    """A renderer of the markdown answer: ``markdown`` (the stored one) while whole."""

    def render(summary: dict[str, Any], truncated: bool) -> bytes:
        whole = markdown if markdown is not None and not truncated else None
        return (whole if whole is not None else state_markdown(summary)).encode("utf-8")

    return render


def snapshot_to_dict(snapshot: StateSnapshot, *, channel: str) -> dict[str, Any]:
    return {
        "channel": channel,
        "last_seq": snapshot.last_seq,
        "audit_seq": snapshot.audit_seq,
        "compacted_at": ts_seconds(snapshot.compacted_at),
        "compacted_by": snapshot.compacted_by,
        **summary_counts(snapshot.summary),
    }


# --- OpenAPI shapes -------------------------------------------------------------------------


class DecisionOutput(serializers.Serializer):
    author = serializers.CharField()
    details = serializers.CharField()
    seq = serializers.IntegerField()
    # A field named like Field.source (the metaclass moves it to _declared_fields).
    source = serializers.CharField(help_text="message:0004")  # type: ignore[assignment]
    time = serializers.CharField()
    title = serializers.CharField()


class BlockerOutput(serializers.Serializer):
    author = serializers.CharField(allow_null=True)
    blocking_items = serializers.ListField(child=serializers.CharField())
    details = serializers.CharField()
    kind = serializers.ChoiceField(choices=["message", "task_dependency", "task_status"])
    source_id = serializers.CharField(help_text="#0023 (a message) or a task id")
    time = serializers.CharField(allow_null=True)
    title = serializers.CharField()


class OwnerTaskOutput(serializers.Serializer):
    id = serializers.CharField()
    lease_expires_at = serializers.CharField(allow_null=True)
    status = serializers.CharField()
    title = serializers.CharField()


class OwnerLockOutput(serializers.Serializer):
    expires_at = serializers.CharField()
    lock_id = serializers.CharField()
    paths = serializers.ListField(child=serializers.CharField())


class OwnerOutput(serializers.Serializer):
    owner = serializers.CharField()
    path_locks = OwnerLockOutput(many=True)
    tasks = OwnerTaskOutput(many=True)


class VerificationOutput(serializers.Serializer):
    acceptance = serializers.ListField(child=serializers.CharField())
    author = serializers.CharField()
    evidence = serializers.CharField()
    source_id = serializers.CharField(help_text="36 (a message's seq) or a task id")
    source_type = serializers.ChoiceField(choices=["message", "task"])
    time = serializers.CharField()
    title = serializers.CharField()


class StateOutput(serializers.Serializer):
    blockers = BlockerOutput(many=True)
    channel = serializers.CharField()
    created_at = serializers.CharField(help_text="the channel's creation time")
    decisions = DecisionOutput(many=True)
    generated_at = serializers.CharField(help_text="now, UTC, to the second")
    last_seq = serializers.IntegerField()
    members = serializers.ListField(child=serializers.CharField())
    open_tasks = TaskRecordOutput(many=True)
    owners = serializers.DictField(child=OwnerOutput())
    path_locks = LockOutput(many=True)
    topic = serializers.CharField()
    truncated = serializers.BooleanField(
        required=False,
        help_text="only when true: long message texts were shortened (AGENTCHAT_STATE_MAX_BYTES)",
    )
    verification = VerificationOutput(many=True)
    whiteboard = WhiteboardEntryOutput(
        many=True,
        required=False,
        help_text="the channel's whiteboard (EP-0118), by key; only on the summary now "
        "(never stored, nor in the markdown) and only when the channel has entries, so the "
        "JSON stays the reference's `state --json` otherwise",
    )


class CompactInput(StrictSerializer):
    strict = StrictBooleanField(required=False, default=False)


class CompactOutput(serializers.Serializer):
    audit_seq = serializers.IntegerField(help_text="the seq of its state.compacted audit")
    blockers_count = serializers.IntegerField()
    channel = serializers.CharField()
    compacted_at = serializers.CharField()
    compacted_by = serializers.CharField()
    decisions_count = serializers.IntegerField()
    last_seq = serializers.IntegerField(help_text="the last seq it covers (before its audit)")
    markdown = serializers.CharField(help_text="what a synced folder's state.md holds")
    open_tasks_count = serializers.IntegerField()
    path_locks_count = serializers.IntegerField()
    truncated = serializers.BooleanField(
        required=False,
        help_text="only when true: the markdown (and summary) are shortened, see the summary",
    )


class SnapshotOutput(CompactOutput):
    summary = StateOutput()


def _format_parameter(what: str) -> OpenApiParameter:
    return OpenApiParameter(
        "format",
        {"type": "string", "enum": list(FORMATS), "default": "json"},
        description=f"`md`: {what} as `text/markdown`",
    )


def _json_or_markdown(output: type[serializers.Serializer[Any]]) -> dict[Any, Any]:
    """The answers of a view that speaks JSON, or markdown with ``?format=md``."""
    return {(200, "application/json"): output, (200, "text/markdown"): {"type": "string"}}


STRICT_PARAMETER = OpenApiParameter(
    "strict",
    {"type": "string", "enum": sorted(STRICT_WORDS)},
    description="1/true: fail with STATE_MALFORMED_SOURCE instead of passing over a message "
    "the reference could not read (see docs/state.md)",
)


# --- views ----------------------------------------------------------------------------------


class StateApi(APIView):
    heavy = True  # agentchat.core.db.heavy
    content_negotiation_class = FormatNegotiation

    @extend_schema(
        tags=TAG,
        operation_id="state_show",
        responses=_json_or_markdown(StateOutput),
        extensions=raises(
            "UNKNOWN_FIELD", "INVALID_VALUE", "STATE_MALFORMED_SOURCE", "STATE_TOO_LARGE"
        ),
        summary="The channel's state summary (the reference CLI's `state`), JSON or markdown",
        description=(
            "The seven sections of the reference CLI's `agent-chat state`: goal and topic, "
            "decisions, open tasks, blockers, owners and leases, path locks, verification "
            "evidence. The markdown (`?format=md`) is byte for byte what the reference prints "
            "for a synced folder of the channel; the JSON has the keys of its `state --json`, "
            "keys sorted (`created_at` is the channel's creation time, `generated_at` now), "
            "and `whiteboard` (the channel's EP-0118 whiteboard entries) when there are any. "
            "Same data, same bytes (but `generated_at`). Derived, never stored: see compact. "
            "Bounded: an answer over AGENTCHAT_STATE_MAX_BYTES (1 MiB) has its long message "
            "texts shortened, each ending in `… [truncated by the server: N characters in all; "
            'the whole text is message #0012]`, the JSON with `"truncated": true` and the '
            "response with `AgentChat-Truncated: 1` (docs/state.md); 409 STATE_TOO_LARGE when "
            "even that does not fit."
        ),
    )
    @query_parameters(_format_parameter("the summary"), STRICT_PARAMETER)
    def get(self, request: AgentRequest, name: str) -> HttpResponse:
        params = _params(request, ("format", "strict"))
        wanted, strict = _format(params), _strict(params)
        channel = channel_get(name, viewer=request.user.name)
        summary = selectors.state_summary(channel=channel, strict=strict)
        if wanted == "md":
            return _bounded(summary, _markdown_of(), media=MARKDOWN)
        # Last (the keys stay sorted), and as written: the values' own keys keep their order.
        last = {"whiteboard": entries} if (entries := whiteboard.entries_all(channel)) else {}
        return _bounded(summary, _json_of({}, last=last), media=JSON)


class CompactApi(APIView):
    heavy = True

    @extend_schema(
        tags=TAG,
        operation_id="state_compact",
        request=CompactInput,
        responses={201: CompactOutput},
        extensions=raises("UNKNOWN_FIELD", "INVALID_TYPE", "STATE_MALFORMED_SOURCE"),
        summary="Compact: store the state summary and post its state.compacted audit",
        description=(
            "Stores the summary up to the channel's last message (its markdown is what the "
            "reference writes as `state.md`) and posts a broadcast `state.compacted` audit "
            "message from the caller, in one transaction. The audit's body is the reference's: "
            "`blockers_count, channel, compacted_at, decisions_count, event, last_seq, "
            "open_tasks_count, path_locks_count`, `last_seq` being the seq before the audit. "
            "Nothing is deleted, edited or truncated. `strict`: as for the summary. The answer's "
            "markdown is bounded as the summary's is (`truncated: true`; empty when even "
            "shortened it does not fit); the stored one, a folder's state.md, stays whole."
        ),
    )
    @query_parameters()
    def post(self, request: AgentRequest, name: str) -> HttpResponse:
        data = CompactInput.validate_input(request.data)
        channel = channel_get(name, viewer=request.user.name)
        snapshot = services.state_compact(
            channel=channel, actor=request.user.name, strict=data["strict"]
        )
        counts = snapshot_to_dict(snapshot, channel=channel.name)
        try:
            return _bounded(
                snapshot.summary,
                _json_of(counts, summary_as="", markdown=snapshot.markdown),
                status=http.HTTP_201_CREATED,
                media=JSON,
            )
        except AppError as exc:
            if exc.code != "STATE_TOO_LARGE":
                raise
            # Committed: the answer says so, without the markdown that cannot fit.
            body = json_bytes(_sorted({**counts, "markdown": "", "truncated": True}))
            response = HttpResponse(body, status=http.HTTP_201_CREATED, content_type=JSON)
            response[TRUNCATED_HEADER] = "1"
            return response


class SnapshotApi(APIView):
    content_negotiation_class = FormatNegotiation

    @extend_schema(
        tags=TAG,
        operation_id="state_snapshot",
        responses=_json_or_markdown(SnapshotOutput),
        extensions=raises(
            "UNKNOWN_FIELD", "INVALID_VALUE", "STATE_RECORD_NOT_FOUND", "STATE_TOO_LARGE"
        ),
        summary="The latest compaction: its counts, markdown and summary",
        description=(
            "404 STATE_RECORD_NOT_FOUND when the channel was never compacted. Bounded as the "
            "summary is (AGENTCHAT_STATE_MAX_BYTES: `truncated: true`, 409 STATE_TOO_LARGE)."
        ),
    )
    @query_parameters(_format_parameter("the stored markdown"))
    def get(self, request: AgentRequest, name: str) -> HttpResponse:
        wanted = _format(_params(request, ("format",)))
        channel = channel_get(name, viewer=request.user.name)
        snapshot = selectors.snapshot_get(channel)
        if wanted == "md":
            return _bounded(snapshot.summary, _markdown_of(snapshot.markdown), media=MARKDOWN)
        counts = snapshot_to_dict(snapshot, channel=channel.name)
        return _bounded(
            snapshot.summary,
            _json_of(counts, summary_as="summary", markdown=snapshot.markdown),
            media=JSON,
        )
