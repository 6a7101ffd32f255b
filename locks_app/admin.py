"""Admin: look at active and expired locks; recover stale ones, or force-release any (break
glass), through the services. The admin acts, audited as ``admin_actor`` (their linked agent,
else their user name); a recovery's new owner is named in the form."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils.html import format_html

from agentchat.core.errors import AppError
from agentchat.core.services import admin_actor
from locks_app import selectors, services
from locks_app.models import PathLock, PathLockEntry


class ExpiryFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return [("active", "active"), ("expired", "expired (recovery required)")]

    def queryset(self, request: HttpRequest, queryset: QuerySet[PathLock]) -> QuerySet[PathLock]:
        now = selectors.lock_now()
        if self.value() == "active":
            return queryset.filter(expires_at__gt=now)
        if self.value() == "expired":
            return queryset.filter(expires_at__lte=now)
        return queryset


class PathLockEntryInline(admin.TabularInline):
    model = PathLockEntry
    extra = 0
    can_delete = False
    fields = ("position", "normalized_path", "display_path", "kind")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class RecoverForm(forms.Form):
    # Not stripped: the service judges names and reasons, with its own codes.
    owner = forms.CharField(
        max_length=64, strip=False, help_text="the agent that takes the lock over"
    )
    reason = forms.CharField(
        max_length=services.REASON_MAX, strip=False, help_text="recorded on the lock"
    )
    lease_seconds = forms.FloatField(
        initial=services.DEFAULT_LEASE_SECONDS, help_text="the new lease, in seconds"
    )


class ForceReleaseForm(forms.Form):
    reason = forms.CharField(
        max_length=services.REASON_MAX,
        strip=False,
        help_text="why the lock is released without its owner (recorded in the audit message)",
    )


@admin.register(PathLock)
class PathLockAdmin(admin.ModelAdmin):
    """Locks change only through the services (each change posts its audit message), so the
    admin neither edits nor deletes them; "recover stale lock" calls ``lock_recover`` and
    "force release" ``lock_force_release``."""

    list_display = ("lock_id", "channel", "owner", "state", "expires_at", "paths", "locked_at")
    list_filter = (ExpiryFilter, "channel")
    search_fields = ("lock_id", "owner", "entries__normalized_path")
    list_select_related = ("channel",)
    readonly_fields = (
        "lock_id",
        "channel",
        "owner",
        "expires_at",
        "locked_at",
        "updated_at",
        "previous_owner",
        "previous_expires_at",
        "recovery_reason",
    )
    inlines = [PathLockEntryInline]
    actions = ["recover_stale_lock", "force_release"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PathLock]:
        return super().get_queryset(request).prefetch_related("entries")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_recover_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("locks_app.change_pathlock")

    @admin.display(description="paths")
    def paths(self, obj: PathLock) -> str:
        return ", ".join(entry.normalized_path for entry in obj.entries.all())

    @admin.display(description="state")
    def state(self, obj: PathLock) -> str:
        if selectors.lock_is_expired(obj):
            return format_html('<strong style="color:#ba2121">{}</strong>', "EXPIRED")
        return "active"

    @admin.action(description="Recover stale lock", permissions=["recover"])
    def recover_stale_lock(
        self, request: HttpRequest, queryset: QuerySet[PathLock]
    ) -> HttpResponse | None:
        form = RecoverForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            recovered = 0
            for lock in queryset.select_related("channel"):
                try:
                    services.lock_recover(
                        channel=lock.channel,
                        owner=form.cleaned_data["owner"],
                        reason=form.cleaned_data["reason"],
                        lock_id=lock.lock_id,
                        lease_seconds=form.cleaned_data["lease_seconds"],
                        actor=admin_actor(request.user),
                    )
                    recovered += 1
                except AppError as exc:
                    self.message_user(
                        request, f"{lock.lock_id}: {exc.code}: {exc.message}", messages.ERROR
                    )
            if recovered:
                self.message_user(request, f"Recovered {recovered} lock(s).", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Recover stale locks",
            "opts": self.model._meta,
            "locks": queryset.select_related("channel"),
            "form": form,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "action": "recover_stale_lock",
        }
        return TemplateResponse(request, "admin/locks_app/pathlock/recover.html", context)

    @admin.action(description="Force release (break glass)", permissions=["recover"])
    def force_release(
        self, request: HttpRequest, queryset: QuerySet[PathLock]
    ) -> HttpResponse | None:
        form = ForceReleaseForm(request.POST if "apply" in request.POST else None)
        if "apply" in request.POST and form.is_valid():
            released = 0
            for lock in queryset.select_related("channel"):
                try:
                    services.lock_force_release(
                        channel=lock.channel,
                        lock_id=lock.lock_id,
                        actor=admin_actor(request.user),
                        reason=form.cleaned_data["reason"],
                    )
                    released += 1
                except AppError as exc:
                    self.message_user(
                        request, f"{lock.lock_id}: {exc.code}: {exc.message}", messages.ERROR
                    )
            if released:
                self.message_user(request, f"Released {released} lock(s).", messages.SUCCESS)
            return None
        context = {
            **self.admin_site.each_context(request),
            "title": "Force-release locks",
            "opts": self.model._meta,
            "locks": queryset.select_related("channel"),
            "form": form,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "action": "force_release",
        }
        return TemplateResponse(request, "admin/locks_app/pathlock/force_release.html", context)
