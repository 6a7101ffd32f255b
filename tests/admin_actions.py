"""Posting an admin action as a browser does (``agentchat.core.admin_actions``)."""

from __future__ import annotations

import html
import re
from typing import Any


def seen_of(page: Any) -> dict[str, str]:
    """The hidden fields saying what the confirmation page showed of each object."""
    found = re.findall(r'name="(seen-\d+)" value="([^"]*)"', page.content.decode())
    return {name: html.unescape(value) for name, value in found}


def post_action(client: Any, changelist: str, data: dict[str, Any], **extra: Any) -> Any:
    """The confirmation page first, then apply with what it showed."""
    if "apply" in data:
        page = client.post(
            changelist, {"action": data["action"], "_selected_action": data["_selected_action"]}
        )
        data = {**seen_of(page), **data}
    return client.post(changelist, data, **extra)
