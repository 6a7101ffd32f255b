"""The one source of "now" for leases and locks, so tests can move time instead of sleeping.

Call ``clock.now()`` through the module (``from agentchat.core.rules import clock``), never bind the
function itself, or the ``clock`` test fixture cannot replace it.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone


def now() -> datetime:
    return timezone.now()
