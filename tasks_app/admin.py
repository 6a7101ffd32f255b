"""Admin: for looking and recovering. Tasks and lease history are read-only (every change goes
through ``tasks_app.services``, which audits it). Two actions on leases, both through the
services: "recover stale lease" asks for the new owner and a reason and calls
``lease_recover``, which refuses unexpired leases; "force release lease" (break-glass) asks for
a reason and calls ``lease_force_release``, which ends any lease and reopens its task."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html

from agentchat.core.admin_actions import (
    ExpiryFilter,
    ReadOnly,
    ReasonForm,
    RecoverForm,
    Seen,
    acted,
    confirm_page,
)
from agentchat.core.identity.services import admin_actor
from agentchat.core.rules.records import is_expired
from channels_app.selectors import channels_refusing_owner
from tasks_app import services
from tasks_app.models import Lease, LeaseHistory, Task, TaskDependency
from tasks_app.services.validation import lease_duration_parse, reason_check


def _expiry_cell(lease: Lease | None) -> str:
    if lease is None:
        return "-"
    if is_expired(lease.lease_expires_at):
        return format_html(
            '<strong style="color:#ba2121">EXPIRED {}</strong>', lease.lease_expires_at
        )
    return format_html("{}", lease.lease_expires_at)


class DependencyInline(ReadOnly, admin.TabularInline):
    model = TaskDependency
    fk_name = "task"
    fields = ("position", "dependency")
    readonly_fields = fields
    extra = 0


class LeaseHistoryInline(ReadOnly, admin.TabularInline):
    model = LeaseHistory
    fields = (
        "at",
        "event",
        "actor",
        "owner",
        "lease_expires_at",
        "previous_owner",
        "previous_lease_expires_at",
        "recovery_reason",
    )
    readonly_fields = fields
    extra = 0


@admin.register(Task)
class TaskAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("task_id", "channel", "title", "status", "owner", "lease_expiry", "updated_at")
    list_filter = ("channel", "status", "owner")
    search_fields = ("task_id", "title", "owner", "created_by", "branch")
    list_select_related = ("channel", "lease")
    inlines = [DependencyInline, LeaseHistoryInline]

    @admin.display(description="lease expires")
    def lease_expiry(self, task: Task) -> str:
        try:
            return _expiry_cell(task.lease)
        except Lease.DoesNotExist:
            return _expiry_cell(None)


def _where(lease: Lease) -> str:
    return f"{lease.task.channel.name}/{lease.task.task_id}"


class ExpiredFilter(ExpiryFilter):
    field = "lease_expires_at"
    options = [("expired", "expired (stale)"), ("active", "active")]


class RecoverLeaseForm(RecoverForm):
    owner = forms.CharField(
        label="New owner", max_length=64, help_text="the agent that takes the task over"
    )
    lease_seconds = forms.FloatField(
        label="Lease seconds", initial=services.DEFAULT_LEASE_SECONDS, required=False
    )


RECOVER_INTRO = (
    "Only an expired lease can be recovered: an active one is refused (LEASE_NOT_EXPIRED). The "
    "new owner gets a fresh lease; the previous owner, the previous expiry and the reason are "
    "recorded, and a lease.recovered audit message is posted to the channel."
)
FORCE_RELEASE_INTRO = (
    "Break-glass: the lease ends now, expired or not, and the task goes back to open with no "
    "owner, as if its owner had released it. Its owner is not told other than by the "
    "lease.force_released audit message posted to the channel, which records you and the reason."
)


@admin.register(Lease)
class LeaseAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("task", "channel", "owner", "expires", "claimed_at", "previous_owner")
    list_filter = (ExpiredFilter, "task__channel", "owner")
    search_fields = ("task__task_id", "owner", "previous_owner", "recovery_reason")
    list_select_related = ("task", "task__channel")
    actions = ["recover_stale_lease", "force_release_lease"]

    @admin.display(description="channel", ordering="task__channel__name")
    def channel(self, lease: Lease) -> str:
        return lease.task.channel.name

    @admin.display(description="expires", ordering="lease_expires_at")
    def expires(self, lease: Lease) -> str:
        return _expiry_cell(lease)

    def has_recover_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("tasks_app.change_lease")

    def _form_page(
        self, request: HttpRequest, queryset: QuerySet[Lease], form: forms.Form, **labels: str
    ) -> TemplateResponse:
        items = [
            (
                lease.pk,
                f"{lease.task.channel.name} / {lease.task.task_id}",
                lease.owner,
                lease.lease_expires_at,
            )
            for lease in queryset.select_related("task", "task__channel")
        ]
        return confirm_page(self, request, items=items, form=form, **labels)

    def _each(self, request: HttpRequest, queryset: QuerySet[Lease], act: Any) -> None:
        """``act(lease, seen)`` for each selected lease, as the page showed it; reports."""
        rows = queryset.select_related("task", "task__channel")
        for where, done in acted(self, request, rows, _where, act):
            self.message_user(request, f"{where}: {done}", messages.SUCCESS)

    @admin.action(description="Recover stale lease", permissions=["recover"])
    def recover_stale_lease(
        self, request: HttpRequest, queryset: QuerySet[Lease]
    ) -> HttpResponse | None:
        form = RecoverLeaseForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            data = form.cleaned_data
            channels = [lease.task.channel for lease in queryset.select_related("task__channel")]
            refused = channels_refusing_owner(data["owner"], channels)
            if refused:
                form.add_error("owner", refused)
            else:
                self._recover(request, queryset, data)
                return None
        return self._form_page(
            request,
            queryset,
            form,
            action="recover_stale_lease",
            title="Recover stale lease",
            intro=RECOVER_INTRO,
            submit="Recover",
        )

    def _recover(
        self, request: HttpRequest, queryset: QuerySet[Lease], data: dict[str, Any]
    ) -> None:
        lease_seconds = data.get("lease_seconds")
        # A bad duration is refused by the service, lease by lease, after its state checks.
        duration = lease_duration_parse(
            services.DEFAULT_LEASE_SECONDS if lease_seconds is None else lease_seconds
        )

        def act(lease: Lease, seen: Seen) -> str:
            services.lease_recover(
                channel=lease.task.channel,
                task_id=lease.task.task_id,
                actor=admin_actor(request.user),
                owner=data["owner"],
                reason=reason_check(data["reason"]),
                duration=duration,
                expected_owner=seen.owner,
                expected_expires_at=seen.expires_at,
            )
            return f"recovered for {data['owner']}"

        self._each(request, queryset, act)

    @admin.action(description="Force release lease (break-glass)", permissions=["recover"])
    def force_release_lease(
        self, request: HttpRequest, queryset: QuerySet[Lease]
    ) -> HttpResponse | None:
        form = ReasonForm(request.POST if "apply" in request.POST else None)
        if not ("apply" in request.POST and form.is_valid()):
            return self._form_page(
                request,
                queryset,
                form,
                action="force_release_lease",
                title="Force release lease",
                intro=FORCE_RELEASE_INTRO,
                submit="Force release",
            )

        def act(lease: Lease, seen: Seen) -> str:
            services.lease_force_release(
                channel=lease.task.channel,
                task_id=lease.task.task_id,
                actor=admin_actor(request.user),
                reason=reason_check(form.cleaned_data["reason"]),
                expected_owner=seen.owner,
                expected_expires_at=seen.expires_at,
            )
            return f"lease of {lease.owner} released"

        self._each(request, queryset, act)
        return None


@admin.register(LeaseHistory)
class LeaseHistoryAdmin(ReadOnly, admin.ModelAdmin):
    list_display = ("at", "event", "task", "owner", "actor", "previous_owner", "recovery_reason")
    list_filter = ("event", "task__channel")
    search_fields = ("task__task_id", "owner", "actor", "previous_owner", "recovery_reason")
    list_select_related = ("task",)
