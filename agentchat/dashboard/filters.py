"""Template filters of the dashboard."""

from __future__ import annotations

from datetime import datetime

from django import template
from django.utils.timesince import timesince, timeuntil

from agentchat.core.rules import clock
from agentchat.dashboard.markdown import text_html

register = template.Library()


@register.filter
def ago(value: datetime | None) -> str:
    """``just now`` under a minute, else ``3 hours ago`` (the largest unit or two)."""
    if value is None:
        return ""
    now = clock.now()
    if (now - value).total_seconds() < 60:
        return "just now"
    return f"{timesince(value, now=now, depth=1)} ago"


@register.filter
def until(value: datetime | None) -> str:
    """``in 4 minutes`` before ``value``, ``expired 2 minutes ago`` after it."""
    if value is None:
        return ""
    now = clock.now()
    if value <= now:
        return (
            f"expired {ago(value)}" if (now - value).total_seconds() >= 60 else "expired just now"
        )
    if (value - now).total_seconds() < 60:
        return "in less than a minute"
    return f"in {timeuntil(value, depth=1)}"


@register.filter
def visible(value: object) -> str:
    """A title or name escaped, each invisible or direction-changing character shown as a
    marked ``U+XXXX`` (``markdown.text_html``)."""
    return text_html("" if value is None else str(value))
