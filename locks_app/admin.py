"""Admin: look at active and expired locks; recover stale ones, or force-release any (break
glass), through the services. The admin acts, audited as ``admin_actor`` (their linked agent,
else their user name); a recovery's new owner is named in the form."""

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
    acted,
    confirm_page,
)
from agentchat.core.identity.services import admin_actor
from agentchat.core.rules.records import Duration, is_expired
from channels_app.selectors import channels_refusing_owner
from locks_app import services
from locks_app.imports import LOCK_FIELDS
from locks_app.models import PathLock, PathLockEntry


class LockExpiryFilter(ExpiryFilter):
    field = "expires_at"
    options = [("active", "active"), ("expired", "expired (recovery required)")]


class PathLockEntryInline(admin.TabularInline):
    model = PathLockEntry
    extra = 0
    can_delete = False
    fields = ("position", "normalized_path", "display_path", "kind")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class LockRecoverForm(RecoverForm):
    # Not stripped: the service judges names and reasons, with its own codes.
    owner = forms.CharField(
        max_length=64, strip=False, help_text="the agent that takes the lock over"
    )
    lease_seconds = forms.FloatField(
        initial=services.DEFAULT_LEASE_SECONDS, help_text="the new lease, in seconds"
    )


RECOVER_INTRO = (
    "Only expired locks can be recovered. The new owner gets a fresh lease; the previous "
    "owner, expiry and your reason are recorded on the lock and in a path.lock.recovered "
    "audit message. A lock that changed since this page was shown is left alone."
)
FORCE_RELEASE_INTRO = (
    "Break glass: the selected locks are removed, active or expired, whoever owns them. Each "
    "release posts a path.lock.force_released audit message, sent by you, with the lock as it "
    "was and your reason. Prefer asking the owner to unlock, or recovering an expired lock. A "
    "lock that changed since this page was shown is left alone."
)


@admin.register(PathLock)
class PathLockAdmin(ReadOnly, admin.ModelAdmin):
    """Locks change only through the services (each change posts its audit message), so the
    admin neither edits nor deletes them; "recover stale lock" calls ``lock_recover`` and
    "force release" ``lock_force_release``."""

    list_display = ("lock_id", "channel", "owner", "state", "expires_at", "paths", "locked_at")
    list_filter = (LockExpiryFilter, "channel")
    search_fields = ("lock_id", "owner", "entries__normalized_path")
    list_select_related = ("channel",)
    # A lock's record, field for field (its paths are the inline below).
    readonly_fields = tuple(field for field in LOCK_FIELDS if field != "paths")
    inlines = [PathLockEntryInline]
    actions = ["recover_stale_lock", "force_release"]

    def get_queryset(self, request: HttpRequest) -> QuerySet[PathLock]:
        return super().get_queryset(request).prefetch_related("entries")

    def has_recover_permission(self, request: HttpRequest) -> bool:
        return request.user.has_perm("locks_app.change_pathlock")

    @admin.display(description="paths")
    def paths(self, obj: PathLock) -> str:
        return ", ".join(entry.normalized_path for entry in obj.entries.all())

    @admin.display(description="state")
    def state(self, obj: PathLock) -> str:
        if is_expired(obj.expires_at):
            return format_html('<strong style="color:#ba2121">{}</strong>', "EXPIRED")
        return "active"

    def _page(
        self,
        request: HttpRequest,
        queryset: QuerySet[PathLock],
        form: forms.Form,
        **labels: str,
    ) -> TemplateResponse:
        items = [
            (lock.pk, f"{lock.lock_id} in {lock.channel.name}", lock.owner, lock.expires_at)
            for lock in queryset.select_related("channel")
        ]
        return confirm_page(self, request, items=items, form=form, **labels)

    def _each(
        self, request: HttpRequest, queryset: QuerySet[PathLock], act: Any, done: str
    ) -> None:
        """``act(lock, seen)`` for each selected lock, as the page showed it (``acted``)."""
        rows = queryset.select_related("channel")
        count = sum(1 for _ in acted(self, request, rows, lambda lock: lock.lock_id, act))
        if count:
            self.message_user(request, f"{done} {count} lock(s).", messages.SUCCESS)

    def _confirmed(
        self,
        request: HttpRequest,
        queryset: QuerySet[PathLock],
        form: forms.Form,
        act: Any,
        done: str,
        **labels: str,
    ) -> HttpResponse | None:
        """An action's two steps: with the page's form applied and valid, ``act(lock, seen)``
        for each selected lock (``_each``); else (first shown, or refused) its page."""
        if form.is_valid():  # bound only once the page's "apply" is posted
            self._each(request, queryset, act, done)
            return None
        return self._page(request, queryset, form, **labels)

    @admin.action(description="Recover stale lock", permissions=["recover"])
    def recover_stale_lock(
        self, request: HttpRequest, queryset: QuerySet[PathLock]
    ) -> HttpResponse | None:
        form = LockRecoverForm(request.POST if "apply" in request.POST else None)
        if form.is_valid():
            refused = channels_refusing_owner(
                form.cleaned_data["owner"], [lock.channel for lock in queryset]
            )
            if refused:
                form.add_error("owner", refused)  # the form is no longer valid: the page again
        return self._confirmed(
            request,
            queryset,
            form,
            lambda lock, seen: services.lock_recover(
                channel=lock.channel,
                owner=form.cleaned_data["owner"],
                reason=form.cleaned_data["reason"],
                lock_id=lock.lock_id,
                lease_seconds=Duration.parse(form.cleaned_data["lease_seconds"]),
                actor=admin_actor(request.user),
                expected_owner=seen.owner,
                expected_expires_at=seen.expires_at,
            ),
            "Recovered",
            action="recover_stale_lock",
            title="Recover stale locks",
            intro=RECOVER_INTRO,
            submit="Recover",
        )

    @admin.action(description="Force release (break glass)", permissions=["recover"])
    def force_release(
        self, request: HttpRequest, queryset: QuerySet[PathLock]
    ) -> HttpResponse | None:
        form = ReasonForm(request.POST if "apply" in request.POST else None)
        return self._confirmed(
            request,
            queryset,
            form,
            lambda lock, seen: services.lock_force_release(
                channel=lock.channel,
                lock_id=lock.lock_id,
                actor=admin_actor(request.user),
                reason=form.cleaned_data["reason"],
                expected_owner=seen.owner,
                expected_expires_at=seen.expires_at,
            ),
            "Released",
            action="force_release",
            title="Force-release locks",
            intro=FORCE_RELEASE_INTRO,
            submit="Force release",
        )
