from __future__ import annotations

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest

from agentchat.core.identity.services import token_revoke
from agentchat.core.models import Agent, ApiToken, Registration


class ApiTokenInline(admin.TabularInline):
    model = ApiToken
    extra = 0
    can_delete = False
    fields = ("hint", "label", "created_at", "last_used_at", "revoked_at")
    readonly_fields = fields

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False  # tokens are created by `manage.py create_agent_token` (shown once)


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ("name", "kind", "harness", "last_seen", "created_at")
    list_filter = ("kind",)
    search_fields = ("name", "display_name", "harness")
    inlines = [ApiTokenInline]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("hint", "agent", "label", "created_at", "last_used_at", "revoked_at")
    list_filter = ("revoked_at",)
    search_fields = ("agent__name", "label", "hint")
    readonly_fields = ("agent", "hint", "digest", "created_at", "last_used_at", "revoked_at")
    actions = ["revoke_tokens"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    @admin.action(description="Revoke token")
    def revoke_tokens(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        for token in queryset:
            token_revoke(token=token)
        self.message_user(request, f"Revoked {queryset.count()} token(s).", messages.SUCCESS)


@admin.register(Registration)
class RegistrationAdmin(admin.ModelAdmin):
    """The agent registry, to look at; deleting a registration frees its agent's slot (a new
    session may register at once). Its status as stored: the API and the dashboard read
    ``stale`` from the heartbeat."""

    list_display = ("agent", "status", "harness", "substrate", "session", "last_heartbeat")
    list_filter = ("status", "harness")
    search_fields = ("agent__name", "harness", "substrate", "session")
    readonly_fields = (
        "agent",
        "harness",
        "substrate",
        "session",
        "status",
        "note",
        "joined_at",
        "status_at",
        "last_heartbeat",
    )
    exclude = ("run_token_digest",)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # sessions register themselves (POST /api/v1/agents/register/)
