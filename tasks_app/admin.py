"""Admin: for looking and recovering. Tasks and lease history are read-only (every change goes
through ``tasks_app.services``, which audits it). Two actions on leases, both through the
services: "recover stale lease" asks for the new owner and a reason and calls
``lease_recover``, which refuses unexpired leases; "force release lease" (break-glass) asks for
a reason and calls ``lease_force_release``, which ends any lease and reopens its task."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html

from agentchat.core import clock
from agentchat.core.errors import AppError
from agentchat.core.services import admin_actor
from tasks_app import services
from tasks_app.models import Lease, LeaseHistory, Task, TaskDependency


class ReadOnlyMixin:
    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


def _expired(lease: Lease) -> bool:
    return lease.lease_expires_at <= clock.now()


def _expiry_cell(lease: Lease | None) -> str:
    if lease is None:
        return "-"
    if _expired(lease):
        return format_html(
            '<strong style="color:#ba2121">EXPIRED {}</strong>', lease.lease_expires_at
        )
    return format_html("{}", lease.lease_expires_at)


class DependencyInline(ReadOnlyMixin, admin.TabularInline):
    model = TaskDependency
    fk_name = "task"
    fields = ("position", "dependency")
    readonly_fields = fields
    extra = 0


class LeaseHistoryInline(ReadOnlyMixin, admin.TabularInline):
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
class TaskAdmin(ReadOnlyMixin, admin.ModelAdmin):
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


class ExpiredFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("expired", "expired (stale)"), ("active", "active")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Lease]) -> QuerySet[Lease]:
        if self.value() == "expired":
            return queryset.filter(lease_expires_at__lte=clock.now())
        if self.value() == "active":
            return queryset.filter(lease_expires_at__gt=clock.now())
        return queryset


class RecoverLeaseForm(forms.Form):
    owner = forms.CharField(
        label="New owner", max_length=64, help_text="the agent that takes the task over"
    )
    reason = forms.CharField(label="Reason", max_length=1000, help_text="recorded with the lease")
    lease_seconds = forms.FloatField(
        label="Lease seconds", initial=services.DEFAULT_LEASE_SECONDS, required=False
    )


class ForceReleaseForm(forms.Form):
    # Not stripped: the service judges the reason, with its own code.
    reason = forms.CharField(
        label="Reason", max_length=1000, strip=False, help_text="recorded with the release"
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
class LeaseAdmin(ReadOnlyMixin, admin.ModelAdmin):
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
        self,
        request: HttpRequest,
        queryset: QuerySet[Lease],
        form: forms.Form,
        *,
        action: str,
        title: str,
        intro: str,
        submit: str,
    ) -> TemplateResponse:
        return TemplateResponse(
            request,
            "admin/tasks_app/lease/lease_action.html",
            {
                **self.admin_site.each_context(request),
                "title": title,
                "opts": self.model._meta,
                "leases": queryset,
                "form": form,
                "action_checkbox_name": ACTION_CHECKBOX_NAME,
                "action": action,
                "intro": intro,
                "submit": submit,
            },
        )

    @admin.action(description="Recover stale lease", permissions=["recover"])
    def recover_stale_lease(
        self, request: HttpRequest, queryset: QuerySet[Lease]
    ) -> HttpResponse | None:
        form = RecoverLeaseForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            self._recover(request, queryset, form.cleaned_data)
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
        if lease_seconds is None:
            lease_seconds = services.DEFAULT_LEASE_SECONDS
        for lease in queryset.select_related("task", "task__channel"):
            task = lease.task
            try:
                services.lease_recover(
                    channel=task.channel,
                    task_id=task.task_id,
                    actor=admin_actor(request.user),
                    owner=data["owner"],
                    reason=data["reason"],
                    lease_seconds=lease_seconds,
                )
            except AppError as exc:
                self.message_user(
                    request,
                    f"{task.channel.name}/{task.task_id}: {exc.code}: {exc.message}",
                    messages.ERROR,
                )
            else:
                self.message_user(
                    request,
                    f"{task.channel.name}/{task.task_id}: recovered for {data['owner']}",
                    messages.SUCCESS,
                )

    @admin.action(description="Force release lease (break-glass)", permissions=["recover"])
    def force_release_lease(
        self, request: HttpRequest, queryset: QuerySet[Lease]
    ) -> HttpResponse | None:
        form = ForceReleaseForm(request.POST if "apply" in request.POST else None)
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
        for lease in queryset.select_related("task", "task__channel"):
            task = lease.task
            try:
                services.lease_force_release(
                    channel=task.channel,
                    task_id=task.task_id,
                    actor=admin_actor(request.user),
                    reason=form.cleaned_data["reason"],
                )
            except AppError as exc:
                self.message_user(
                    request,
                    f"{task.channel.name}/{task.task_id}: {exc.code}: {exc.message}",
                    messages.ERROR,
                )
            else:
                self.message_user(
                    request,
                    f"{task.channel.name}/{task.task_id}: lease of {lease.owner} released",
                    messages.SUCCESS,
                )
        return None


@admin.register(LeaseHistory)
class LeaseHistoryAdmin(ReadOnlyMixin, admin.ModelAdmin):
    list_display = ("at", "event", "task", "owner", "actor", "previous_owner", "recovery_reason")
    list_filter = ("event", "task__channel")
    search_fields = ("task__task_id", "owner", "actor", "previous_owner", "recovery_reason")
    list_select_related = ("task",)
