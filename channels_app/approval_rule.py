"""The approval rule (SPEC §9's governance profile): its one home.

A message with status ``needs-approval`` is a request. An answer is a reply to it
(``reply_to``, same channel) with status ``approved`` or ``rejected``; it decides the request
only when its sender is a person, as the server stamped it (``sender_kind`` human, and not an
imported message, whose provenance no identity vouches for), outside the requester's namespace
(its root and every sub-agent of it: ``humx`` never decides for ``humx.bot``, which its
token acts as, nor ``humx.bot`` for ``humx``; ``namespace_root``), and, when the channel
names a maintainer, that maintainer. Every other answer is a comment: the
request stays pending.

Three forms of the same rule, kept side by side so they cannot drift apart:
``ANSWER_CONDITION`` (the per-row part: the partial index of ``Message`` and its migration
use it), ``deciding_answers`` (a query of the answers that decide, for ``channels_app
.approvals``), and ``answer_decides`` (one answer judged in Python, for a page that has the
rows already). Pure: no model is imported, so ``channels_app.models`` can use it.

The queries name the partial indexes' conditions with their constants written into the SQL
(``REQUEST_QUERY``, ``ANSWER_QUERY``: ``literal``), not bound as parameters. SQLite uses a
partial index only when the query's WHERE implies the index's condition; it matches a bound
``status = ?`` against ``status = 'needs-approval'``, but not a bound ``status IN (?, ?)``:
with the ORM's parameters the answers' index was never used, and for each request the query
walked every message of the channel by its ``channel_id`` index, reading ``sender_kind`` and
``imported``, which a row stores after its body and SQLite reaches through the body's
overflow pages. 300 requests of 400 KB took 19 s a call (issue 17), the navigation's count as
long. ``tests/dashboard/test_approvals_work.py`` checks the plans with the parameters bound.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

from django.db.models import F, Q, Value
from django.db.models.expressions import Combinable
from django.db.models.functions import Concat, Left, StrIndex
from django.db.models.lookups import Exact

from agentchat.core.rules.presence import namespace_root

APPROVAL_REQUEST = "needs-approval"
APPROVAL_ANSWERS = ("approved", "rejected")
HUMAN = "human"

# What an answer row must be, whatever it answers.
ANSWER_CONDITION = Q(status__in=APPROVAL_ANSWERS, sender_kind=HUMAN, imported=False)

_LITERAL = re.compile(r"[a-z][a-z.-]*\Z")


class literal(Value):
    """A constant string written into the SQL (``'needs-approval'``) instead of bound as a
    parameter, so that SQLite's planner can match a partial index's condition (see the module).
    Only for the rule's own constants: lower-case words, dots and hyphens, nothing to quote."""

    def __init__(self, value: str) -> None:
        if not _LITERAL.fullmatch(value):
            raise ValueError(f"not a literal: {value!r}")
        super().__init__(value)

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[str | int, ...]]:
        return f"'{self.value}'", ()


# The partial indexes' conditions as the queries say them (constants in the SQL).
REQUEST_QUERY = Q(status=literal(APPROVAL_REQUEST))
ANSWER_QUERY = Q(
    status__in=[literal(status) for status in APPROVAL_ANSWERS],
    sender_kind=literal(HUMAN),
    imported=False,
)


def root_key(name: Combinable) -> Left:
    """The SQL of ``namespace_root(name) + "."`` (``alice.`` of ``alice.critic.x`` and of
    ``alice``): the part of ``name + "."`` up to its first dot, in SQLite and PostgreSQL."""
    dotted = Concat(name, Value("."))
    return Left(dotted, StrIndex(dotted, Value(".")))


def same_namespace(sender: str, requester: str) -> bool:
    """Whether ``sender`` and ``requester`` have one namespace root (the rule's Python form)."""
    return namespace_root(sender) == namespace_root(requester)


def deciding_answers(request: Any) -> Q:
    """The answers that decide ``request``, given as expressions over the request row
    (``OuterRef`` of a subquery, or ``F`` of a join): ``request("seq")`` and the like."""
    return (
        ANSWER_QUERY
        & Q(channel=request("channel"), reply_to=request("seq"))
        & ~Q(sender=request("sender"))
        & ~Q(Exact(root_key(F("sender")), root_key(request("sender"))))
        & (Q(channel__maintainer="") | Q(sender=F("channel__maintainer")))
    )


class _Row(Protocol):
    seq: int
    sender: str
    status: str
    sender_kind: str
    imported: bool
    reply_to: int | None


def is_answer(message: _Row) -> bool:
    """Whether ``message`` is shaped like an answer (a reply with an answer status)."""
    return message.reply_to is not None and message.status in APPROVAL_ANSWERS


def answer_decides(answer: _Row, request: _Row | None, *, maintainer: str) -> bool:
    """Whether ``answer`` decides ``request`` (both of one channel whose maintainer is
    ``maintainer``, "" for none); False when ``request`` is None or no request."""
    return (
        request is not None
        and request.status == APPROVAL_REQUEST
        and is_answer(answer)
        and answer.reply_to == request.seq
        and answer.sender_kind == HUMAN
        and not answer.imported
        and not same_namespace(answer.sender, request.sender)
        and (not maintainer or answer.sender == maintainer)
    )


def may_decide(viewer: str, viewer_kind: str, *, request_sender: str, maintainer: str) -> bool:
    """Whether an answer from ``viewer`` (an identity of ``viewer_kind``) would decide a
    request from ``request_sender`` in a channel whose maintainer is ``maintainer``."""
    return (
        viewer_kind == HUMAN
        and not same_namespace(viewer, request_sender)
        and (not maintainer or viewer == maintainer)
    )
