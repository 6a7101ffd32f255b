"""Admin: for looking. Messages are immutable (SPEC §4) and are the audit history of tasks and
locks too, so the admin neither adds, edits nor deletes them; nor cursors (a deleted cursor
would deliver everything again) or marker claims (a deleted claim would get a second owner).
Channels are never deleted: deletion would cascade to their messages, cursors, claims, tasks,
leases, lease history and locks."""

from __future__ import annotations

from django.contrib import admin
from django.http import HttpRequest

from channels_app.models import Channel, Cursor, MarkerClaim, Message


class ReadOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


@admin.register(Channel)
class ChannelAdmin(admin.ModelAdmin):
    list_display = ("name", "topic", "last_seq", "created_by", "created_at")
    search_fields = ("name", "topic")
    readonly_fields = ("last_seq", "created_at", "created_by")

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


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
