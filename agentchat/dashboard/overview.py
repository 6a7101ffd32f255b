"""The overview, a signed-in person's home (``/``): who is active and what each agent is doing
(its leases, the locks it holds, its latest status event and message, when it was last seen),
the approvals waiting, the expired leases and stale locks waiting for a human, the channels
with messages for me. And ``nav/``: the channel sidebar and the counts that every page's
``shell.js`` polls (tab title, desktop notifications).

Everything is read in a fixed number of queries whatever the number of agents (no query per
agent, per task or per lock: tests/dashboard/test_overview.py counts them), each bounded, and
only through the channels the viewer may see (``channels_visible_to``)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_http_methods

from agentchat.core.identity.humans import SignedInRequest, human_agent
from agentchat.core.identity.selectors import agent_list_named
from agentchat.core.models import Agent
from agentchat.core.rules import clock
from agentchat.dashboard.budget import heavy_page
from channels_app.activity import channels_by_activity, channels_unread_for
from channels_app.approvals import approvals_pending
from channels_app.presence import presence_seen_by
from channels_app.selectors import channels_visible_to, message_heads_at
from locks_app.models import PathLock
from locks_app.selectors import locks_among
from tasks_app.models import Lease
from tasks_app.selectors import leases_among, leases_expired_among

NEVER = datetime.min.replace(tzinfo=UTC)
AGENTS_SHOWN = 200  # agents on the overview (the agents page lists them all)
ROWS_MAX = 500  # leases, locks read at most
APPROVALS_SHOWN = 20
CHANNELS_SIDEBAR = 200  # channels the sidebar lists (by latest activity)
POLL_SECONDS = 15  # how often overview.js and shell.js ask again (docs/dashboard.md)


@functools.lru_cache(maxsize=4096)
def _url(route: str, *args: object) -> str:
    """``reverse`` of a dashboard route, remembered: the overview links each agent's tasks,
    locks and latest message, and ``{% url %}`` for each would cost more than the page's
    queries."""
    return reverse(f"dashboard:{route}", args=args)


def _lease_item(lease: Lease, now: datetime) -> dict[str, Any]:
    return {
        "url": _url("channel-tasks", lease.task.channel.name) + f"#task-{lease.task.task_id}",
        "task": lease.task.task_id,
        "title": lease.task.title,
        "channel": lease.task.channel.name,
        "owner": lease.owner,
        "expires_at": lease.lease_expires_at,
        "expired": lease.lease_expires_at <= now,
    }


def _lock_item(lock: PathLock, now: datetime) -> dict[str, Any]:
    return {
        "url": _url("channel-locks", lock.channel.name) + f"#lock-{lock.lock_id}",
        "lock_id": lock.lock_id,
        "channel": lock.channel.name,
        "owner": lock.owner,
        "paths": [entry.normalized_path for entry in lock.entries.all()],
        "expires_at": lock.expires_at,
        "expired": lock.expires_at <= now,
    }


def _people(me: Agent, leases: list[dict[str, Any]], locks: list[dict[str, Any]]) -> list[Any]:
    """Every agent with its registry presence, its activity where I may look, and what it holds;
    the active ones first, then by last activity."""
    seen = presence_seen_by(viewer=me.name)
    holders = {item["owner"] for item in leases} | {item["owner"] for item in locks}
    names = sorted(
        set(seen) | holders, key=lambda n: seen.get(n, {}).get("last_active_at") or NEVER
    )
    names = [n for n in reversed(names) if n != me.name][:AGENTS_SHOWN]
    known = agent_list_named(names)
    heads = message_heads_at(
        (seen[n]["channel"], seen[n]["last_seq"]) for n in names if "last_seq" in seen.get(n, {})
    )
    people = []
    for name in names:
        item: dict[str, Any] = {"name": name, "kind": "agent", **known.get(name, {})}
        item["registered"] = name in known
        item.update(seen.get(name, {}))
        if "last_seq" in item:
            item["latest"] = heads.get((item["channel"], item["last_seq"]))
            item["latest_url"] = _url("message", item["channel"], item["last_seq"])
        item["leases"] = [lease for lease in leases if lease["owner"] == name]
        item["locks"] = [lock for lock in locks if lock["owner"] == name]
        people.append(item)
    rank = {"active": 0, "idle": 1, "sleeping": 2}
    people.sort(key=lambda p: rank.get(p.get("presence", ""), 3))  # stable: by activity within
    return people


def overview_context(me: Agent) -> dict[str, Any]:
    """What the overview shows (see the module's docstring); a fixed number of queries."""
    now = clock.now()
    visible = channels_visible_to(me.name)
    leases = [_lease_item(lease, now) for lease in leases_among(visible, limit=ROWS_MAX)]
    locks = [_lock_item(lock, now) for lock in locks_among(visible, limit=ROWS_MAX)]
    pending, more = approvals_pending(viewer=me.name, limit=APPROVALS_SHOWN)
    unread = channels_unread_for(me, limit=CHANNELS_SIDEBAR)
    people = _people(me, leases, locks)
    return {
        "agent": me,
        "people": people,
        "active": sum(1 for p in people if p.get("presence") == "active"),
        "pending": pending,
        "pending_more": more,
        "expired_leases": [lease for lease in leases if lease["expired"]],
        "stale_locks": [lock for lock in locks if lock["expired"]],
        "unread_channels": unread,
        "poll_seconds": POLL_SECONDS,
        "now": now,
    }


@login_required
@require_http_methods(["GET"])
@heavy_page
def overview(request: SignedInRequest) -> HttpResponse:
    """The overview page; ``overview.js`` refreshes its sections from ``overview_fragment``."""
    return render(request, "dashboard/overview.html", overview_context(human_agent(request.user)))


@require_http_methods(["GET"])
@heavy_page
def overview_fragment(request: HttpRequest) -> HttpResponse:
    """The overview's sections as server-rendered HTML (what the page swaps in every
    POLL_SECONDS). 403 when not signed in."""
    if not request.user.is_authenticated:
        return HttpResponse("sign in first", status=403, content_type="text/plain")
    me = human_agent(request.user)  # signed in
    return render(request, "dashboard/_overview.html", overview_context(me))


@require_http_methods(["GET"])
@heavy_page
def nav_state(request: HttpRequest) -> HttpResponse:
    """JSON for every page's ``shell.js``: the CHANNELS_SIDEBAR channels of latest activity
    among all I may see (``channels_by_activity``: name, conversation unread for me, last
    activity; ``more`` when there are others, which the channel list shows), and what may
    deserve a notification: the pending approvals, the expired leases, my unread total (of
    those channels). Built into the page with ``textContent`` only. 403 when not signed in."""
    if not request.user.is_authenticated:
        return JsonResponse({"error": {"code": "NOT_AUTHENTICATED"}}, status=403)
    me = human_agent(request.user)  # signed in
    channels, more = channels_by_activity(me, limit=CHANNELS_SIDEBAR)
    rows = [
        {
            "name": item["name"],
            "url": _url("channel", item["name"]),
            "unread": item["unread"],
            "at": item["at"].isoformat() if item["at"] else None,
        }
        for item in channels
    ]
    now = clock.now()
    pending, _ = approvals_pending(viewer=me.name, limit=APPROVALS_SHOWN)
    expired = [_lease_item(lease, now) for lease in _expired_leases(me)]
    return JsonResponse(
        {
            "channels": rows,
            "more": more,
            "unread": sum(r["unread"] for r in rows),
            "approvals": [
                {
                    "key": f"approval:{m.channel.name}:{m.seq}",
                    "text": f"{m.sender} asks for approval in {m.channel.name}: {m.title}",
                    "url": reverse("dashboard:approvals"),
                }
                for m in pending
            ],
            "expired": [_expired_note(item) for item in expired],
            "poll_seconds": POLL_SECONDS,
        }
    )


def _expired_note(item: dict[str, Any]) -> dict[str, str]:
    """A notification of an expired lease: a key that is new for each expiry, its words."""
    when = item["expires_at"].isoformat()
    return {
        "key": f"lease:{item['channel']}:{item['task']}:{when}",
        "text": f"{item['owner']}'s lease on {item['task']} in {item['channel']} expired",
        "url": item["url"],
    }


def _expired_leases(me: Agent) -> list[Lease]:
    return leases_expired_among(channels_visible_to(me.name), limit=APPROVALS_SHOWN)
