"""The one place that knows the channel layers' internals.

Channels' layer API can add a channel to a group and send to it, but cannot delete a channel
or say who is in a group. Freeing a finished inbox and probing a group's subscriptions (tests,
leak checks) need the layer's own bookkeeping; these functions know where it is in the two
layers this project runs on: ``channels.layers.InMemoryChannelLayer`` and
``channels_redis.pubsub.RedisPubSubChannelLayer`` (whose state lives in one loop layer per
event loop). With any other layer they know nothing and say so (None, or nothing to free).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from channels.layers import InMemoryChannelLayer

try:
    from channels_redis.pubsub import RedisPubSubChannelLayer
except ImportError:  # pragma: no cover - channels-redis is in requirements.txt
    RedisPubSubChannelLayer = None

logger = logging.getLogger(__name__)

# More stale rings than this in a finished inbox are left to the layer's own expiry.
INBOX_DRAIN_MAX = 1000


def _loop_state(layer: Any) -> tuple[dict[str, Any], dict[str, Any], str] | None:
    """(channels held in this process, groups, prefix of a group's key) or None if unknown.
    Call it on the event loop that uses the layer (the Redis layer keeps state per loop)."""
    if isinstance(layer, InMemoryChannelLayer):
        return layer.channels, layer.groups, ""
    if RedisPubSubChannelLayer is not None and isinstance(layer, RedisPubSubChannelLayer):
        inner = layer._get_layer()
        return inner.channels, inner.groups, inner._get_group_channel_name("")
    return None


def group_channels(layer: Any, group: str) -> set[str] | None:
    """The channels of this process subscribed to ``group``; None for a layer we don't know."""
    state = _loop_state(layer)
    if state is None:
        return None
    _, groups, prefix = state
    return set(groups.get(prefix + group, ()))


def channel_held(layer: Any, channel: str) -> bool | None:
    """Whether this process's layer still holds ``channel`` (its queue, its subscription)."""
    state = _loop_state(layer)
    if state is None:
        return None
    return channel in state[0]


def channels_held(layer: Any) -> set[str] | None:
    state = _loop_state(layer)
    return None if state is None else set(state[0])


async def inbox_close(layer: Any, inbox: str | None, groups: Iterable[str] = ()) -> None:
    """Leave ``groups`` and free ``inbox``.

    Channels has no call that deletes a channel: the in-memory layer keeps rings that arrived
    after their reader finished for a minute (and scans them on every send), and the Redis
    pub/sub layer stays subscribed to the inbox for good. Both free a channel when a receive on
    it is cancelled, so: drain what is queued, then cancel one receive on the empty inbox.

    It never raises: with Redis down the unsubscriptions fail, and the layer would subscribe
    to them again when it reconnects (a leaked subscription per wait or stream that ended
    during the outage); what could not be unsubscribed is forgotten instead (``_forget``).
    """
    if inbox is None:
        return  # ``inbox_open`` made none: nothing to leave
    names = [inbox, *(_group_name(layer, group) for group in groups)]
    try:
        for group in groups:
            await layer.group_discard(group, inbox)
        await _inbox_free(layer, inbox)
    except Exception as exc:
        logger.warning("the layer could not unsubscribe (%s): forgetting %s", exc, names)
        await _inbox_free(layer, inbox, swallow=True)
    _forget(layer, names)


async def inbox_open(layer: Any) -> str | None:
    """A new inbox, or None when the layer cannot make one now (Redis down): the caller goes
    without a doorbell, on its sweeps of the database. Nothing half-made is left behind."""
    before = channels_held(layer) or set()
    try:
        inbox: str = await layer.new_channel()
    except Exception as exc:
        logger.warning("the layer cannot subscribe (%s): waiting on the sweep alone", exc)
        state = _loop_state(layer)
        if state is not None:
            for name in set(state[0]) - before:
                if not _subscribed(layer, name):
                    state[0].pop(name, None)
        return None
    return inbox


async def group_join(layer: Any, group: str, inbox: str) -> bool:
    """``group_add``; False (logged) when the layer cannot subscribe now (Redis down)."""
    try:
        await layer.group_add(group, inbox)
    except Exception as exc:
        logger.warning("the layer cannot join %s (%s): waiting on the sweep alone", group, exc)
        return False
    return True


def _group_name(layer: Any, group: str) -> str:
    state = _loop_state(layer)
    return group if state is None else state[2] + group


def _shards(layer: Any) -> list[Any]:
    if RedisPubSubChannelLayer is not None and isinstance(layer, RedisPubSubChannelLayer):
        return list(layer._get_layer()._shards)
    return []


def _subscribed(layer: Any, name: str) -> bool:
    return any(name in shard._subscribed_to for shard in _shards(layer))


def _forget(layer: Any, names: Iterable[str]) -> None:
    """Names that no channel or group of this process uses any more but whose unsubscription
    failed: dropped from the Redis layer's books and from its client's, whose reconnection
    would subscribe to them again (Redis lost them with the connection)."""
    state = _loop_state(layer)
    if state is None:
        return
    held, groups, _ = state
    for name in names:
        if name in held or name in groups:
            continue
        for shard in _shards(layer):
            shard._subscribed_to.discard(name)
            pubsub = shard._pubsub
            if pubsub is not None:
                for key in (name, name.encode()):
                    pubsub.channels.pop(key, None)
                    pubsub.pending_unsubscribe_channels.discard(key)


async def _inbox_free(layer: Any, inbox: str, *, swallow: bool = False) -> None:
    try:
        await _inbox_drain(layer, inbox)
    except Exception:
        if not swallow:
            raise
        state = _loop_state(layer)
        if state is not None:
            state[0].pop(inbox, None)


async def _inbox_drain(layer: Any, inbox: str) -> None:
    for _ in range(INBOX_DRAIN_MAX):
        if not channel_held(layer, inbox):
            return  # unknown layer, or already freed: never subscribe again just to free it
        receiving = asyncio.ensure_future(layer.receive(inbox))
        await asyncio.sleep(0)  # a queued ring is taken at once; an empty inbox parks
        if not receiving.done():
            receiving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await receiving
            return
        if receiving.exception() is not None:
            return
