"""Admin: for looking. Messages are immutable (SPEC §4) and are the audit history of tasks and
locks too, so the admin neither adds, edits nor deletes them; nor cursors (a deleted cursor
would deliver everything again) or marker claims (a deleted claim would get a second owner).
Channels are never deleted: deletion would cascade to their messages, cursors, claims, tasks,
leases, lease history and locks. A channel's topic, members and visibility are edited through
``channel_update``, which audits the change."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.http import HttpRequest

from agentchat.core.admin_actions import ReadOnly
from agentchat.core.identity.services import admin_actor
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_channel_name
from channels_app import services
from channels_app.models import Channel, Cursor, MarkerClaim, Message

# Changed only through channels_app.services.channel_update, which audits them.
AUDITED_FIELDS = ("topic", "members", "visibility")


class ReadOnlyAdmin(ReadOnly, admin.ModelAdmin):
    pass


class ChannelForm(forms.ModelForm):
    """The services' own rules, as form errors (the admin does not bypass them)."""

    class Meta:
        model = Channel
        fields = ("name", "topic", "members", "visibility", "maintainer")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data
        checks: dict[str, Callable[[Any], object]] = {
            "name": check_channel_name,
            "topic": services.topic_check,
            "visibility": services.visibility_check,
        }
        for field, check in checks.items():
            if field in data:
                try:
                    check(data[field])
                except AppError as exc:
                    self.add_error(field, f"{exc.code}: {exc.message}")
        members = data.get("members")
        if "members" in data:
            try:
                if not isinstance(members, list):
                    raise AppError("INVALID_TYPE", "members must be a list of agent names")
                data["members"] = services.members_normalize(members)
            except AppError as exc:
                self.add_error("members", f"{exc.code}: {exc.message}")
        if "members" in data and "visibility" in data and "members" not in self.errors:
            try:
                services.roster_check(visibility=data["visibility"], members=data["members"])
            except AppError as exc:
                self.add_error("members", f"{exc.code}: {exc.message}")
        return data


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    form = ChannelForm
    list_display = ("name", "visibility", "topic", "last_seq", "created_by", "created_at")
    list_filter = ("visibility",)
    search_fields = ("name", "topic")
    readonly_fields = ("last_seq", "created_at", "created_by")

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def save_model(self, request: HttpRequest, obj: Channel, form: Any, change: bool) -> None:
        """A change of topic, members or visibility goes through ``channel_update`` (as the
        admin, audited as ``admin_actor``); other fields are saved as the form set them."""
        if not change:
            obj.created_by = admin_actor(request.user)
            super().save_model(request, obj, form, change)
            return
        others = [field for field in form.changed_data if field not in AUDITED_FIELDS]
        if others:
            obj.save(update_fields=others)
        try:
            services.channel_update(
                channel=obj,
                actor=admin_actor(request.user),
                admin=True,
                **{field: form.cleaned_data[field] for field in AUDITED_FIELDS},
            )
        except AppError as exc:  # a concurrent change broke a rule the form had checked
            transaction.set_rollback(True)
            self.message_user(request, f"{exc.code}: {exc.message}", messages.ERROR)
        obj.refresh_from_db()


@admin.register(Message)
class MessageAdmin(ReadOnlyAdmin):
    list_display = ("channel", "seq", "sender", "title", "status", "kind", "ts")
    list_filter = ("kind", "channel")
    search_fields = ("title", "body", "sender", "id")
    list_select_related = ("channel",)


@admin.register(Cursor)
class CursorAdmin(ReadOnlyAdmin):
    list_display = ("agent", "channel", "seq", "updated_at")
    list_filter = ("channel",)


@admin.register(MarkerClaim)
class MarkerClaimAdmin(ReadOnlyAdmin):
    list_display = ("channel", "marker", "owner", "claimed_at")
    list_filter = ("channel",)
    search_fields = ("marker", "owner")
