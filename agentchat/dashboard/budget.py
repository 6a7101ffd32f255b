"""The dashboard's pages within the budgets the API's heavy requests have
(``agentchat.core.db.heavy``), so that no person's browser can slow an agent's posts and peeks.

**Work.** A page that reads a lot (the channel list, a channel, its tasks, locks and state, a
message, the agents, approvals, search, the live fragment) is a ``heavy_page``: its view runs

- on the heavy requests' pool (``run_db_heavy``), never on the threads that the API's short
  requests wait for (``run_db``); while it waits for that pool it holds no thread of its own;
- one at a time per signed-in person, through the API's heavy gate (``heavy_gate``, keyed by
  the user: ``page_key``), so that pages share its fair dispatch and never take the thread it
  keeps for peeks: more wait, past AGENTCHAT_HEAVY_QUEUE_PER_AGENT a page says "busy" (429);
- at most AGENTCHAT_PAGE_CONCURRENCY (1) of all the people's pages at once: measured with three
  people looping a page of 170 KB of markdown beside an agent posting and peeking, two pages at
  once (both heavy threads rendering, contending for the interpreter's lock with the agent's
  requests) put the agent's p99 at 935 ms, one at a time at 120 ms;
- within the work budget (``work_budget``, AGENTCHAT_HEAVY_BUDGET_SECONDS): a page past it says
  that it ran out of its budget (503), not a 500 or a blank page.

**Bytes.** A page renders at most AGENTCHAT_PAGE_MAX_BYTES of markdown: a long body is shown as
an excerpt (``EXCERPT_BYTES``) with a link to the whole message (``/c/<name>/m/<seq>/``, which
pages a body bigger than the budget), a list stops showing bodies once the budget is used
(``Bodies``), and the state summary shows its long texts shortened and says when it is cut.
"""

from __future__ import annotations

import asyncio
import functools
import weakref
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from agentchat.core.db.heavy import budget_check, heavy_gate, person_key, work_budget
from agentchat.core.db.transactions import run_db_heavy
from agentchat.core.identity.humans import human_agent
from agentchat.core.rules.errors import AppError
from agentchat.state.bounded import text_cut


# One heavy page at a time per signed-in person, as the API lane's gate does per token.
def page_key(user_pk: int) -> bytes:
    """The heavy gate's key of a signed-in person's pages (the API's keys are ``a<id>`` and
    digests: never this): ``person_key``, the key of their websockets' reads too."""
    return person_key(user_pk)


# A body in a list (a channel's page, search, approvals, the live fragment) shows at most this
# many bytes of its markdown; the rest is a link away.
EXCERPT_BYTES = 4096


_slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
    weakref.WeakKeyDictionary()
)


def _page_slots() -> asyncio.Semaphore:
    """This event loop's AGENTCHAT_PAGE_CONCURRENCY slots: how many heavy pages of all the
    people run at once (the others wait holding no thread), so that the pages together leave
    heavy threads (and the interpreter's lock) to the API's agents."""
    loop = asyncio.get_running_loop()
    slots = _slots.get(loop)
    if slots is None:
        slots = _slots[loop] = asyncio.Semaphore(settings.AGENTCHAT_PAGE_CONCURRENCY)
    return slots


def _methods_heavy(methods: tuple[str, ...], method: str | None) -> bool:
    method = (method or "").upper()
    return (method if method != "HEAD" else "GET") in methods


def heavy_page(
    view: Callable[..., HttpResponse] | None = None, *, methods: tuple[str, ...] = ("GET",)
) -> Any:
    """Run the page ``view`` (for ``methods``; others as before) on the heavy pool, after the
    same person's previous heavy page, within the work budget. Goes inside ``login_required``
    (an anonymous request runs the view as it is: it refuses at once)."""

    def decorate(view: Callable[..., HttpResponse]) -> Callable[..., Any]:
        plain = sync_to_async(view)

        @functools.wraps(view)
        async def page(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            user = await request.auser()
            if not _methods_heavy(methods, request.method) or not user.is_authenticated:
                return await plain(request, *args, **kwargs)
            request.user = user  # resolved once: the view does not look it up again
            key = page_key(user.pk)

            async def run() -> HttpResponse:
                async with _page_slots():
                    return await run_db_heavy(_budgeted, view, request, args, kwargs)

            try:
                response = await heavy_gate().run(key, run)
            except AppError as exc:  # HEAVY_REQUEST_BUSY: this person's pages are queued
                return await sync_to_async(refusal_page)(request, exc)
            assert response is not None  # None only for a request gone while waiting
            return response

        return page

    return decorate(view) if view is not None else decorate


def _budgeted(
    view: Callable[..., HttpResponse], request: HttpRequest, args: Any, kwargs: Any
) -> HttpResponse:
    """The view within the work budget; its refusal page once the budget runs out."""
    try:
        with work_budget():
            response = view(request, *args, **kwargs)
            if hasattr(response, "render") and callable(response.render):
                response = response.render()
            return response
    except AppError as exc:
        if exc.code != "WORK_BUDGET_EXCEEDED":
            raise
        return refusal_page(request, exc)


def refusal_page(request: HttpRequest, error: AppError) -> HttpResponse:
    """The page that says why this page is not shown (its status: the code's)."""
    user = getattr(request, "user", None)
    agent = human_agent(user) if user is not None and user.is_authenticated else None
    return render(
        request,
        "dashboard/error.html",
        {"agent": agent, "error": error, "budget_seconds": settings.AGENTCHAT_HEAVY_BUDGET_SECONDS},
        status=error.status,
    )


def excerpt(text: str, limit: int = EXCERPT_BYTES) -> tuple[str, bool]:
    """``text`` cut to at most ``limit`` UTF-8 bytes (``agentchat.state.bounded.text_cut``),
    and whether it was cut."""
    head = text_cut(text, limit)
    return (text, False) if head is None else (head, True)


class Bodies:
    """The markdown a page may still render (AGENTCHAT_PAGE_MAX_BYTES): ``take(body)`` gives a
    body's excerpt that fits what is left (None once too little is left), and looks at the work
    budget."""

    MINIMUM = 256  # an excerpt shorter than this is not worth showing: the link says more

    def __init__(self, limit: int | None = None, *, each: int = EXCERPT_BYTES) -> None:
        self.left = settings.AGENTCHAT_PAGE_MAX_BYTES if limit is None else limit
        self.each = each
        self.used_up = False  # a body was left out: the page says so

    def take(self, body: str) -> tuple[str, bool] | None:
        budget_check()
        limit = max(0, min(self.each, self.left))
        shown, cut = excerpt(body, limit)
        if cut and limit < self.MINIMUM:
            self.used_up = True
            return None
        self.left -= len(shown.encode("utf-8"))
        return shown, cut
