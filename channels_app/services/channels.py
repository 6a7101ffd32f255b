"""Channels: create and update, their roster, visibility and topic."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models.functions import Lower

from agentchat.core.db.transactions import write_atomic
from agentchat.core.identity.rates import rate_take
from agentchat.core.live.push import push_on_commit
from agentchat.core.models import Agent
from agentchat.core.rules.errors import AppError
from agentchat.core.rules.names import check_agent_name, check_channel_name
from agentchat.core.rules.validation import text_check
from channels_app.locking import channel_lock
from channels_app.models import Channel
from channels_app.selectors import channel_not_found, channel_visible
from channels_app.services.direct import NAME_PREFIX, direct_channel_refuse
from channels_app.services.events import audit_post
from channels_app.services.groups import ROSTER_GROUP
from channels_app.services.limits import MEMBERS_MAX, TOPIC_MAX, VISIBILITIES

EVENT_CHANNEL_UPDATED = "channel.updated"


def members_normalize(members: Iterable[str]) -> list[str]:
    """Validated agent names, duplicates dropped, order kept. Raises INVALID_NAME,
    INVALID_VALUE (more than MEMBERS_MAX)."""
    result: list[str] = []
    for member in members:
        check_agent_name(member, field="members")
        if member not in result:
            result.append(member)
            if len(result) > MEMBERS_MAX:
                raise AppError(
                    "INVALID_VALUE",
                    f"a channel has at most {MEMBERS_MAX} members",
                    detail={"field": "members", "max": MEMBERS_MAX},
                )
    return result


def topic_check(topic: object, *, imported: bool = False) -> str:
    """Raises INVALID_VALUE (also over TOPIC_MAX characters; a control character, a line or
    paragraph separator: a topic is one line, like a title), FIELD_TOO_LARGE,
    INVISIBLE_CHARACTER. An ``imported`` topic (a reference folder's ``_meta.json``: the
    reference CLI writes any ``--topic`` it is given, newlines and escapes too) may span lines
    and hold control characters, so that every folder the reference writes imports; it is
    still visible text."""
    return text_check(
        topic, field="topic", max_chars=TOPIC_MAX, single_line=not imported, visible=True
    )


def roster_check(*, visibility: str, members: list[str]) -> None:
    """A members-only channel must keep someone who can see it: at least one member that is an
    agent (names on a roster need not be agents yet; a roster of none would hide the channel
    from everyone, its own audit trail included). Raises CHANNEL_MEMBERS_REQUIRED."""
    if visibility != Channel.Visibility.MEMBERS:
        return
    if not members or not Agent.objects.filter(name__in=members).exists():
        raise AppError(
            "CHANNEL_MEMBERS_REQUIRED",
            "a members-only channel needs at least one member that is an agent",
            detail={"field": "members"},
        )


def visibility_check(visibility: object) -> str:
    """``open`` or ``members``. Raises INVALID_VALUE."""
    if visibility not in VISIBILITIES or not isinstance(visibility, str):
        raise AppError(
            "INVALID_VALUE",
            f"visibility must be one of: {', '.join(VISIBILITIES)}",
            detail={"field": "visibility", "choices": list(VISIBILITIES)},
        )
    return visibility


@write_atomic()
def channel_create(
    *,
    name: str,
    created_by: str,
    topic: str = "",
    members: Iterable[str] = (),
    visibility: str = Channel.Visibility.OPEN,
    budgeted: bool = False,
) -> Channel:
    """Create a channel. A members-only channel always has its creator on the roster (put
    first when the request did not name it): a creator could not see its own channel otherwise.
    Names beginning ``dm.`` are the direct channels' (``services.direct``): refused here, so
    no channel made by someone else sits beside a pair's under a look-alike name.
    ``budgeted`` (an agent's request): the creation takes one from the creator's post budget
    (``rates.rate_take``), given back when it fails.

    Raises INVALID_NAME, INVALID_VALUE, FIELD_TOO_LARGE, CHANNEL_MEMBERS_REQUIRED (the creator
    is no agent), CHANNEL_EXISTS (names are unique case-insensitively, so the name of a
    members-only channel is taken for non-members too: the 409 says that much, nothing more)."""
    check_channel_name(name)
    if name.lower().startswith(NAME_PREFIX):
        raise AppError(
            "INVALID_NAME",
            f"channel names beginning {NAME_PREFIX!r} are reserved for direct channels "
            "(HTTP v1 envelopes make them)",
            detail={"field": "name"},
        )
    topic_check(topic)
    members = members_normalize(members)
    visibility_check(visibility)
    if visibility == Channel.Visibility.MEMBERS and created_by not in members:
        members = members_normalize([created_by, *members])
    roster_check(visibility=visibility, members=members)
    return channel_insert(
        name=name,
        topic=topic,
        members=members,
        created_by=created_by,
        visibility=visibility,
        budget=created_by if budgeted else None,
    )


def channel_insert(*, name: str, budget: str | None = None, **fields: Any) -> Channel:
    """The row of a new channel ``name`` with ``fields`` (judged by the caller), in the
    caller's transaction, rung to the roster once it commits; ``budget``: the agent whose post
    budget it takes from (given back when it fails). Raises CHANNEL_EXISTS (names are unique
    case-insensitively: looked up first; the unique index refuses a concurrent one),
    RATE_LIMITED."""
    if Channel.objects.annotate(lname=Lower("name")).filter(lname=name.lower()).exists():
        raise _channel_exists(name)
    try:
        with transaction.atomic():
            if budget is not None:
                rate_take(agent=budget)
            channel = Channel.objects.create(name=name, **fields)
    except IntegrityError:
        raise _channel_exists(name) from None
    push_on_commit(ROSTER_GROUP, {"kind": "channel.created", "channel": channel.pk})
    return channel


def _channel_exists(name: str) -> AppError:
    return AppError("CHANNEL_EXISTS", f"channel {name!r} already exists", detail={"name": name})


@write_atomic()
def channel_update(
    *,
    channel: Channel,
    actor: str,
    topic: str | None = None,
    members: Iterable[str] | None = None,
    visibility: str | None = None,
    admin: bool = False,
) -> Channel:
    """Change the topic, members or visibility of a channel and post one ``channel.updated``
    audit message from ``actor`` in the same transaction: the before and after of each changed
    field. A request that changes nothing writes and posts nothing.

    The rules, so that nobody ends up with a channel nobody can see unnoticed:
    - ``actor`` must see the channel, judged on the row as locked here (a removal that commits
      first wins); ``admin=True`` (the Django admin, ``actor`` = ``admin_actor``) skips that.
    - Whoever makes a channel members-only is put on its roster when missing (first) — except
      an admin, who is not an agent of the channel.
    - A member may remove itself (it then no longer sees the channel), but a members-only
      channel always keeps a member that is an agent (``roster_check``).
    - A channel that names a maintainer (SPEC §9) is changed by its maintainer only (and the
      admin); without one, by anyone who sees it, as in the reference.

    A direct channel (``services.direct``) is never changed (CHANNEL_DIRECT).

    Returns the channel as written. Raises CHANNEL_NOT_FOUND, CHANNEL_NOT_MAINTAINER,
    INVALID_NAME, INVALID_VALUE, FIELD_TOO_LARGE, CHANNEL_MEMBERS_REQUIRED, CHANNEL_DIRECT.
    """
    if topic is not None:
        topic_check(topic)
    if members is not None:
        members = members_normalize(members)
    if visibility is not None:
        visibility_check(visibility)
    # The row lock serializes concurrent updates on PostgreSQL (on SQLite the write transaction
    # already does), so each audit's "before" is what the previous update wrote.
    current = channel_lock(channel)
    if current is None or not (admin or channel_visible(current, actor)):
        raise channel_not_found(channel.name)
    # Its roster is who may read a pair's direct messages: never changed, not even by an admin.
    direct_channel_refuse(current, "changes of topic, members or visibility")
    if current.maintainer and not admin and actor != current.maintainer:
        raise AppError(
            "CHANNEL_NOT_MAINTAINER",
            f"channel {current.name} is governed by {current.maintainer}: only they change it",
            detail={"channel": current.name, "maintainer": current.maintainer, "actor": actor},
        )
    before: dict[str, Any] = {
        "members": list(current.members),
        "topic": current.topic,
        "visibility": current.visibility,
    }
    after = dict(before)
    if topic is not None:
        after["topic"] = topic
    if members is not None:
        after["members"] = members
    if visibility is not None:
        after["visibility"] = visibility
    private = Channel.Visibility.MEMBERS
    if (
        before["visibility"] != private
        and after["visibility"] == private
        and not admin
        and actor not in after["members"]
    ):
        after["members"] = members_normalize([actor, *after["members"]])
    changed = sorted(field for field in after if after[field] != before[field])
    if {"members", "visibility"} & set(changed):
        roster_check(visibility=after["visibility"], members=after["members"])
    if not changed:
        return current
    for field in changed:
        setattr(current, field, after[field])
    current.save(update_fields=changed)
    audit_post(
        channel=current,
        actor=actor,
        event=EVENT_CHANNEL_UPDATED,
        subject=current.name,
        payload={
            "actor": actor,
            "after": {field: after[field] for field in changed},
            "before": {field: before[field] for field in changed},
            "changed_fields": changed,
            "channel": current.name,
            "event": EVENT_CHANNEL_UPDATED,
        },
        access_change=bool({"members", "visibility"} & set(changed)),
    )
    return current
