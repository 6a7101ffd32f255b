"""What the admins share: ``ReadOnly`` (the rows no admin adds, changes or deletes), and, for
the break-glass actions (locks_app and tasks_app: recover, force release), the reason form,
the confirmation page, and the record of what the admin saw.

The page carries, for each selected object, the owner and expiry the admin was shown
(``seen_token``). The action hands them to the service, which compares them inside its
transaction (compare-and-set): a lock or lease that changed hands or was renewed between the
page and the POST is refused with the family's "changed concurrently" code, never acted on
for whoever holds it now.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db.models import QuerySet
from django.http import HttpRequest
from django.template.response import TemplateResponse

from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.validation import REASON_MAX

TEMPLATE = "admin/agentchat_core/action_confirm.html"


class ReadOnly:
    """Mixed into a ModelAdmin or an inline: nothing added, changed or deleted through the
    admin (what changes goes through the services, which audit it)."""

    def has_add_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: object = None) -> bool:
        return False


class ExpiryFilter(admin.SimpleListFilter):
    """The admins' "state" filter of rows that expire: ``active`` (``field`` after now) or
    ``expired`` (at or before now). Each family names its ``field`` and its ``options``."""

    title = "state"
    parameter_name = "state"
    field: str
    options: list[tuple[str, str]]

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return self.options

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "active":
            return queryset.filter(**{f"{self.field}__gt": clock.now()})
        if self.value() == "expired":
            return queryset.filter(**{f"{self.field}__lte": clock.now()})
        return queryset


class ReasonForm(forms.Form):
    # Not stripped: the service judges the reason, with its family's code.
    reason = forms.CharField(
        max_length=REASON_MAX,
        strip=False,
        help_text="recorded on the record and in the audit message",
    )


def owner_exists_check(owner: str) -> str:
    """A recovery's new owner must be an agent (the service checks only the name's shape: a
    lease or lock granted to no one could be recovered by anyone, released by no one)."""
    if not Agent.objects.filter(name=owner).exists():
        raise forms.ValidationError(f"no agent named {owner!r}")
    return owner


class RecoverForm(ReasonForm):
    """A recovery's form: the new ``owner`` (an agent), the reason, the new ``lease_seconds``,
    in that order. Each family declares the two fields in its own words."""

    field_order = ["owner", "reason", "lease_seconds"]

    def clean_owner(self) -> str:
        return owner_exists_check(self.cleaned_data["owner"])


@dataclass(frozen=True)
class Seen:
    """The owner and expiry of one object as the admin was shown them."""

    owner: str
    expires_at: datetime


def seen_token(owner: str, expires_at: datetime) -> str:
    return f"{expires_at.isoformat()} {owner}"


def seen_field(pk: Any) -> str:
    return f"seen-{pk}"


def seen_parse(request: HttpRequest, pk: Any) -> Seen | None:
    """What the page showed for ``pk``, or None when the POST does not say (a malformed or
    missing field: the action is then refused, never applied to the current holder)."""
    text = request.POST.get(seen_field(pk), "")
    stamp, _, owner = text.partition(" ")
    try:
        expires_at = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    if not owner or expires_at.tzinfo is None:
        return None
    return Seen(owner=owner, expires_at=expires_at)


def confirm_page(
    modeladmin: Any,
    request: HttpRequest,
    *,
    items: list[tuple[Any, str, str, datetime]],
    form: forms.Form,
    action: str,
    title: str,
    intro: str,
    submit: str,
) -> TemplateResponse:
    """The confirmation page of an action: ``items`` are (pk, label, owner, expiry)."""
    rows = [
        {
            "pk": pk,
            "label": label,
            "owner": owner,
            "expires_at": expires_at,
            "seen_field": seen_field(pk),
            "seen": seen_token(owner, expires_at),
        }
        for pk, label, owner, expires_at in items
    ]
    return TemplateResponse(
        request,
        TEMPLATE,
        {
            **modeladmin.admin_site.each_context(request),
            "title": title,
            "opts": modeladmin.model._meta,
            "rows": rows,
            "form": form,
            "action_checkbox_name": ACTION_CHECKBOX_NAME,
            "action": action,
            "intro": intro,
            "submit": submit,
        },
    )


def acted(
    model_admin: Any,
    request: HttpRequest,
    rows: Iterable[Any],
    where: Callable[[Any], str],
    act: Callable[[Any, Seen], Any],
) -> Iterator[tuple[str, Any]]:
    """``act(row, seen)`` for each of ``rows`` as the page showed it: yields ``(where(row),
    what act answered)`` of each done; a row the page did not show, or that the service
    refused, is reported as an error message and skipped."""
    for row in rows:
        label = where(row)
        seen = seen_parse(request, row.pk)
        if seen is None:
            model_admin.message_user(
                request, f"{label}: not shown on the page; look again", messages.ERROR
            )
            continue
        try:
            result = act(row, seen)
        except AppError as exc:
            model_admin.message_user(request, f"{label}: {exc.code}: {exc.message}", messages.ERROR)
        else:
            yield label, result
