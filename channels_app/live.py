"""Live delivery (DESIGN §6) as plain async functions, free of ASGI: the wait and the stream.

Both follow the same order: subscribe to the channel's group, then read the database, then
await a ring. A ring is only a doorbell (the layer delivers at most once); what is delivered
is always read back by seq, so a lost or late ring delays nothing that a later ring, a sweep
or the wait's last look at its deadline does not recover.

- ``message_wait(...) -> WaitResult``: the long-poll's algorithm. The wait endpoint
  authenticates, parses, calls it and sends ``result.body()``.
- ``message_stream(...)``: an async context manager that subscribes, opens a ``MessageStream``
  at ``since``, feeds it the channel's rings and watches the session's token. The websocket
  endpoints iterate the stream and send what it yields at the pace their client reads; the
  iteration raises AUTH_INVALID once the token is revoked and CHANNEL_NOT_FOUND once the
  viewer may no longer see the channel.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import weakref
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from channels.layers import get_channel_layer
from django.conf import settings

from agentchat.core.db.transactions import run_db
from agentchat.core.identity.revocation import (
    Credential,
    credential_live,
    credential_watch,
    credentials_gone,
    token_watch,
)
from agentchat.core.live.follows import heavy_read
from agentchat.core.live.layer import group_join, inbox_close, inbox_open
from agentchat.core.live.push import EVENT_TYPE
from agentchat.core.live.stopping import stopping, stopping_refusal, stopping_wait
from agentchat.core.rules.errors import AppError
from agentchat.relevance import is_relevant
from channels_app.models import Channel
from channels_app.records import message_dict_json, message_to_dict
from channels_app.selectors import (
    READ_LIMIT_MAX,
    channel_last_seq_visible,
    messages_after_visible,
)
from channels_app.services import (
    CursorMove,
    ReadPage,
    channel_group,
    cursors_compare_and_set,
    message_read,
    read_page_body,
)

logger = logging.getLogger(__name__)

# A stream reads the database a batch at a time: at most this many messages and about this many
# bytes of them (at least one message). One batch is what a stream holds while its client reads.
STREAM_BATCH = 64
STREAM_BATCH_BYTES = 256 * 1024
# Messages carried by rings that a stream keeps for seqs it has not sent yet; past this it
# forgets them and reads the database instead, so a client that fell behind costs no memory.
STREAM_INLINE_MAX = 64


def ring_may_concern(event: dict[str, Any], name: str) -> bool:
    """False only when a ring certainly carries nothing relevant to ``name``."""
    if event.get("kind") != "message" or event.get("access"):
        return True  # a change of members or visibility concerns every waiter: re-check
    sender, to = event.get("from"), event.get("to")
    if not isinstance(sender, str) or not isinstance(to, list):
        return True  # not the shape a post rings with: read the database
    return is_relevant(sender=sender, to=to, name=name)


def _token_revoked() -> AppError:
    return AppError("AUTH_INVALID", "the token was revoked")


def _revoked(credential: Credential) -> AppError:
    if credential.token_id is None:
        return AppError("AUTH_INVALID", "the session ended (signed out)")
    return _token_revoked()


def _messages_for(*, credential: Credential | None, **read: Any) -> list[Any]:
    """``messages_after_visible``, then (in the same database turn, after the read) whether the
    credential still authenticates: what a revocation committed before the check would hide is
    never read by then, so a batch read here holds only messages that were posted before it.
    Raises AUTH_INVALID, CHANNEL_NOT_FOUND. Sync."""
    rows = messages_after_visible(**read)
    if credential is not None and credentials_gone([credential]):
        raise _revoked(credential)
    return rows


# --- the wait ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitResult:
    page: ReadPage
    timed_out: bool

    @property
    def cursor(self) -> int:
        return self.page.cursor

    def body(self) -> bytes:
        return read_page_body(self.page, timed_out=self.timed_out)


class _CursorMoves:
    """Collects the cursor moves of the waiters that one ring woke and writes them in one
    transaction (``cursors_compare_and_set``) instead of one transaction each."""

    def __init__(self) -> None:
        self.pending: list[tuple[CursorMove, asyncio.Future[bool]]] = []

    async def move(self, move: CursorMove) -> bool:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if not self.pending:
            loop.call_soon(lambda: asyncio.ensure_future(self.flush()))
        self.pending.append((move, future))
        return await future

    async def flush(self) -> None:
        batch, self.pending = self.pending, []
        try:
            results = await run_db(cursors_compare_and_set, moves=[move for move, _ in batch])
        except Exception:
            # (A deadlock, a lost connection.) Nothing moved: each waiter reads for itself.
            logger.warning("a batch of %d cursor moves failed", len(batch), exc_info=True)
            results = [False] * len(batch)
        for (_, future), moved in zip(batch, results, strict=True):
            if not future.done():
                future.set_result(moved)


_cursor_moves: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _CursorMoves] = (
    weakref.WeakKeyDictionary()
)


async def cursor_move(move: CursorMove) -> bool:
    """Compare-and-set one cursor, batched with the other moves of this loop's turn."""
    loop = asyncio.get_running_loop()
    moves = _cursor_moves.get(loop)
    if moves is None:
        moves = _cursor_moves[loop] = _CursorMoves()
    return await moves.move(move)


def _render(message: dict[str, Any]) -> bytes | None:
    try:
        return message_dict_json(message)
    except Exception:  # the database read renders it again, and fails there if it must
        return None


async def message_wait(
    *,
    channel: Channel,
    agent: Any,
    timeout: float,
    limit: int = READ_LIMIT_MAX,
    max_bytes: int | None = None,
    token_id: int | None = None,
    abandoned: threading.Event | None = None,
    deliver: Callable[[WaitResult], Awaitable[None]] | None = None,
) -> WaitResult:
    """Wait up to ``timeout`` seconds for messages relevant to ``agent`` after its cursor.

    Returns as soon as some exist (a page, like ``message_read``, with the cursor moved), or
    at the deadline with ``timed_out`` and the cursor unchanged. While parked it holds no
    thread and no database connection: it awaits its own layer inbox. A ring that carries the
    next message, relevant and small, is answered from the ring: the cursor moves onto it by a
    compare-and-set, batched with the other waiters the ring woke. Anything else (a gap, a big
    message, a cursor moved meanwhile, a change of members or visibility) is read from the
    database, which checks that ``agent`` may still see the channel; the database also gets a
    look every AGENTCHAT_STREAM_SWEEP_SECONDS (a message whose ring was lost is found then, not
    at a deadline up to 15 minutes away) and one last look at the deadline. With ``token_id``,
    revoking the token ends the wait with AUTH_INVALID and moves nothing. Raises AUTH_INVALID,
    CHANNEL_NOT_FOUND (the agent may no longer see the channel: nothing moved). The caller
    sets ``abandoned`` when its client goes away, before it cancels the wait: a cursor move
    already on a database thread then does not commit (ClientGone, or a compare-and-set
    that does not happen). ``deliver`` (the live endpoint's send) is awaited with the result before
    the wait leaves its group and frees its inbox: a moved cursor's answer goes out at once, not
    after the layer's round trips, in which a client that left would lose it.
    """
    layer = get_channel_layer()
    inbox = await inbox_open(layer)  # None: the layer is down (Redis), the sweeps find it all
    group = channel_group(channel.pk)
    parked = _Parked(layer=layer, inbox=inbox, group=group)
    try:
        result = await parked.wait(
            channel=channel,
            agent=agent,
            timeout=timeout,
            limit=limit,
            max_bytes=max_bytes,
            token_id=token_id,
            abandoned=abandoned,
        )
        if deliver is not None:
            await deliver(result)
        return result
    finally:
        if parked.receiving is not None:
            parked.receiving.cancel()
        await asyncio.shield(_wait_cleanup(layer, group, inbox, parked.receiving))


class _Parked:
    """A wait's subscription: its inbox, and the receive on it that may still be pending."""

    def __init__(self, *, layer: Any, inbox: str | None, group: str) -> None:
        self.layer = layer
        self.inbox = inbox
        self.group = group
        # Not cancelled on a timeout: a cancelled receive frees the inbox.
        self.receiving: asyncio.Future[Any] | None = None

    async def wait(
        self,
        *,
        channel: Channel,
        agent: Any,
        timeout: float,
        limit: int,
        max_bytes: int | None,
        token_id: int | None,
        abandoned: threading.Event | None,
    ) -> WaitResult:
        layer, inbox = self.layer, self.inbox
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        revoked_wait: asyncio.Future[Any] | None = None
        # The server stopping (SIGTERM) ends a wait only where it is parked: a read or cursor
        # move already on a database thread finishes and its page is answered; a refusal
        # raised at a park point has moved nothing.
        stop_wait = asyncio.ensure_future(stopping_wait())

        # (a cursor, the last seq examined from it with nothing relevant found): each read
        # examines at most READ_SCAN_ROWS messages, and goes on from where the last one stopped.
        scan: tuple[int, int] | None = None

        async def read() -> ReadPage:
            nonlocal scan
            page = await run_db(
                message_read,
                channel=channel,
                agent=agent,
                limit=limit,
                max_bytes=max_bytes,
                advance_if_empty=False,
                token_id=token_id,
                abandoned=abandoned,
                known=scan,
            )
            if not page.parts:
                scan = (page.cursor, page.last_seq if page.scanned is None else page.scanned)
            return page

        try:
            async with token_watch(token_id) as revoked:
                if inbox is not None and not await group_join(layer, self.group, inbox):
                    inbox = None  # no doorbell: the sweeps look at the database
                revoked_wait = asyncio.ensure_future(revoked.wait())
                while True:
                    if stopping():
                        raise stopping_refusal()
                    page = await read()
                    if page.parts:
                        return WaitResult(page, timed_out=False)
                    if page.scanned is not None and page.scanned < page.last_seq:
                        if deadline <= loop.time():
                            return WaitResult(page, timed_out=True)
                        continue  # the row budget ran out: the next rows, in a read of their own
                    # Park. Every message up to `known` is known to be irrelevant to us.
                    known = page.last_seq
                    sweep_at = loop.time() + _sweep_interval()
                    while True:
                        remaining = deadline - loop.time()
                        if remaining <= 0:
                            page = await read()  # a ring is at most once, the database the record
                            return WaitResult(page, timed_out=not page.parts)
                        if sweep_at <= loop.time():
                            scan = (page.cursor, known)
                            break  # a sweep: a message whose ring was lost is found now
                        if self.receiving is None and inbox is not None:
                            self.receiving = asyncio.ensure_future(layer.receive(inbox))
                        await asyncio.wait(
                            {f for f in (self.receiving, revoked_wait, stop_wait) if f is not None},
                            timeout=min(remaining, sweep_at - loop.time()),
                            return_when=asyncio.FIRST_COMPLETED,
                        )
                        if revoked.is_set():
                            raise _token_revoked()
                        if stopping():
                            raise stopping_refusal()
                        if self.receiving is None or not self.receiving.done():
                            continue
                        if self.receiving.exception() is not None:  # the layer failed
                            inbox = self.receiving = None  # the sweeps go on
                            continue
                        ring, self.receiving = self.receiving.result(), None
                        if ring.get("type") != EVENT_TYPE:
                            continue
                        event = ring["event"]
                        if not ring_may_concern(event, agent.name):
                            if event.get("seq") == known + 1:
                                known += 1
                            continue
                        # The ring carries the next message and it is ours: render it, then
                        # move the cursor onto it, so the move happens only with a body that
                        # can be sent.
                        part = None
                        if event.get("seq") == known + 1 and "message" in event:
                            part = _render(event["message"])
                        move = CursorMove(
                            agent.pk, channel.pk, page.cursor, event["seq"], token_id, abandoned
                        )
                        if part is not None and await cursor_move(move):
                            page = ReadPage([part], event["seq"], False, event["seq"])
                            return WaitResult(page, timed_out=False)
                        scan = (page.cursor, known)  # up to `known`: irrelevant, as the rings say
                        break  # a gap, a big message, a moved cursor or a revoked token: read
        finally:
            stop_wait.cancel()
            if revoked_wait is not None:
                revoked_wait.cancel()


def _sweep_interval(seconds: float | None = None) -> float:
    """``seconds`` (AGENTCHAT_STREAM_SWEEP_SECONDS), spread over the parked sessions and streams
    so that they do not all look at once."""
    if seconds is None:
        seconds = settings.AGENTCHAT_STREAM_SWEEP_SECONDS
    return seconds * random.uniform(0.8, 1.2)


async def _wait_cleanup(layer: Any, group: str, inbox: str | None, receiving: Any) -> None:
    if inbox is None:
        return
    if receiving is not None:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await receiving
    await inbox_close(layer, inbox, [group])  # never raises (Redis down: forgotten)


# --- the stream -------------------------------------------------------------------------------


class MessageStream:
    """Every message of ``channel`` after a position, in seq order, each seq once.

    ``viewer`` is whom the stream is for: every read of the database checks, after reading,
    that ``viewer`` may still see the channel (a change of members or visibility is always read
    from the database: its ring never carries it), and the iteration raises CHANNEL_NOT_FOUND
    when not, so nothing from the change on is yielded. ``credential`` is what the viewer
    authenticated with: the same read checks that it still does, and a message carried by a
    ring is yielded only after a check made since the ring came (``credential_live``, one query
    per loop turn for every stream), so once a revocation or a sign-out has committed nothing
    posted after it is yielded; the iteration raises AUTH_INVALID instead.

    ``await stream.open(since)`` fixes the position (``since``, or the channel's last seq when
    None: only what is posted from then on); subscribe to the channel's group first, so that
    nothing posted after the position is missed. Then feed it every ring (``ring(event)``,
    which never blocks) and iterate it::

        async for message in stream:   # dicts, as message_to_dict writes them
            await send(message)

    It yields a message carried by its ring when it is the next one, and reads the database
    (``STREAM_BATCH`` messages at a time) to replay, to fill a gap a lost ring left, or for a
    message too big to ride along: each such read as a peek runs (``heavy_read``: in the turn
    of ``gate_key``, the viewer's agent, at the heavy gate, on the heavy pool, within the work
    budget), so that many streams replaying a long history never hold the threads posts need;
    a sweep every AGENTCHAT_STREAM_SWEEP_SECONDS finds a lost last message that no later ring
    would reveal. It produces only as fast as it is iterated: a live endpoint that waits for its
    client holds at most one batch, whatever the backlog. Never moves a cursor.
    """

    def __init__(
        self,
        *,
        channel: Channel,
        viewer: str,
        sweep_seconds: float | None = None,
        credential: Credential | None = None,
        gate_key: bytes | None = None,
    ) -> None:
        self.channel = channel
        self.viewer = viewer
        self.credential = credential
        # The viewer's key at the heavy gate (``websocket_principal``'s); by name without one.
        self.gate_key = gate_key or b"viewer:" + viewer.encode("utf-8", "surrogatepass")
        self.position = 0  # the last seq yielded (or the starting point)
        self.known_last = 0  # the highest seq known to exist
        # Messages carried by rings, each with the count of rings when it came.
        self._inline: dict[int, tuple[int, dict[str, Any]]] = {}
        self._rings = 0  # rings received so far
        self._checked = 0  # rings received before the credential's last check began
        self._batch: deque[dict[str, Any]] = deque()
        self._wake = asyncio.Event()
        self._sweep_seconds = (
            settings.AGENTCHAT_STREAM_SWEEP_SECONDS if sweep_seconds is None else sweep_seconds
        )
        self._next_sweep = 0.0
        self.error: BaseException | None = None
        # Set with ``error`` by ``end()``: a live endpoint blocked on its client learns of it too.
        self.ended = asyncio.Event()

    def end(self, error: BaseException) -> None:
        """End the stream: the iteration raises ``error`` from its next step on."""
        if self.error is None:
            self.error = error
        self.ended.set()
        self._wake.set()

    async def open(self, since: int | None) -> None:
        """Raises CHANNEL_NOT_FOUND."""
        last_seq = await run_db(channel_last_seq_visible, self.channel, viewer=self.viewer)
        self.position = last_seq if since is None else since
        self.known_last = last_seq
        self._schedule_sweep()

    def _schedule_sweep(self) -> None:
        self._next_sweep = asyncio.get_running_loop().time() + _sweep_interval(self._sweep_seconds)

    def ring(self, event: dict[str, Any]) -> None:
        if event.get("kind") != "message" or not isinstance(event.get("seq"), int):
            return
        seq = event["seq"]
        if seq <= self.position:
            return
        self._rings += 1
        self.known_last = max(self.known_last, seq)
        message = event.get("message")
        if message is not None and len(self._inline) < STREAM_INLINE_MAX:
            self._inline[seq] = (self._rings, message)
        self._wake.set()

    def __aiter__(self) -> MessageStream:
        return self

    async def __anext__(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while True:
            if self.error is not None:
                raise self.error
            while self._batch:
                message = self._batch.popleft()
                if message["seq"] > self.position:
                    return self._advance(message)
            following = self.position + 1
            if following in self._inline:
                came, message = self._inline[following]
                if self.credential is not None and came > self._checked:
                    rings = self._rings
                    if not await credential_live(self.credential):
                        self.end(_revoked(self.credential))
                    self._checked = max(self._checked, rings)
                    continue
                del self._inline[following]
                return self._advance(message)
            if self.known_last >= following:
                rings = self._rings
                rows = await heavy_read(
                    self.gate_key,
                    _messages_for,
                    credential=self.credential,
                    channel=self.channel,
                    viewer=self.viewer,
                    after=self.position,
                    limit=STREAM_BATCH,
                    max_bytes=STREAM_BATCH_BYTES,
                )
                self._checked = max(self._checked, rings)
                if rows:
                    self._batch.extend(message_to_dict(row) for row in rows)
                else:
                    self.known_last = self.position  # nothing committed there after all
                continue
            self._wake.clear()
            remaining = self._next_sweep - loop.time()
            if remaining > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), remaining)
                continue
            self._schedule_sweep()
            try:
                last_seq = await run_db(channel_last_seq_visible, self.channel, viewer=self.viewer)
            except AppError:
                raise  # the viewer may no longer see the channel
            except Exception:  # keep streaming; the next ring or sweep retries
                logger.exception("stream sweep of channel %s failed", self.channel.pk)
                continue
            self.known_last = max(self.known_last, last_seq)

    def _advance(self, message: dict[str, Any]) -> dict[str, Any]:
        self.position = message["seq"]
        if self._inline:
            for seq in [seq for seq in self._inline if seq <= self.position]:
                del self._inline[seq]
        return message


@contextlib.asynccontextmanager
async def message_stream(
    *,
    channel: Channel,
    viewer: str,
    since: int | None,
    token_id: int | None = None,
    sweep_seconds: float | None = None,
    credential: Credential | None = None,
    watch: bool = True,
    gate_key: bytes | None = None,
) -> AsyncIterator[MessageStream]:
    """``async with message_stream(channel=…, viewer=…, since=…) as stream:`` a live
    ``MessageStream`` for ``viewer`` from ``since`` (None: from now on).

    On entry it subscribes to the channel's group, then fixes the position, so nothing posted
    once the caller sees the block entered is missed; inside, a task feeds the stream every
    ring. A revoked ``token_id`` (or ``credential``: a token or a browser's session) ends the
    stream with AUTH_INVALID (``stream.ended`` is set, so a caller blocked on its client can
    stop at once); ``watch=False`` leaves that to the caller (a connection of many streams
    watches once), while the stream still checks the credential before it yields (see
    ``MessageStream``). A failure to receive rings ends it with that failure. On exit it leaves
    the group and frees the inbox, however the block ends.
    Raises on entry CHANNEL_NOT_FOUND (the viewer may no longer see the channel).
    """
    if credential is None and token_id is not None:
        credential = Credential(token_id=token_id)
    layer = get_channel_layer()
    inbox = await inbox_open(layer)  # None: the layer is down (Redis), the sweeps find it all
    group = channel_group(channel.pk)
    stream = MessageStream(
        channel=channel,
        viewer=viewer,
        sweep_seconds=sweep_seconds,
        credential=credential,
        gate_key=gate_key,
    )
    tasks: list[asyncio.Future[Any]] = []
    try:
        async with credential_watch(credential if watch else None) as revoked:
            rung = inbox is not None and await group_join(layer, group, inbox)
            await stream.open(since)
            if rung and inbox is not None:
                tasks.append(asyncio.ensure_future(_rings(layer, inbox, stream)))
            tasks.append(asyncio.ensure_future(_revocation(revoked, stream)))
            yield stream
    finally:
        try:
            await tasks_end(tasks)
        finally:
            await asyncio.shield(inbox_close(layer, inbox, [group]))


async def tasks_end(tasks: list[asyncio.Future[Any]]) -> None:
    """Cancel ``tasks`` and wait until each has ended, whatever it ended with. A cancellation
    of the caller meanwhile does not cut the wait short (nothing is left running), and is
    raised once every task has ended: the caller stops as it was asked to."""
    for task in tasks:
        task.cancel()
    cancelled = False
    for task in tasks:
        while not task.done():
            try:
                await asyncio.wait([task])
            except asyncio.CancelledError:
                cancelled = True
        if not task.cancelled():
            task.exception()  # retrieved: whatever it ended with is the caller's to ignore
    if cancelled:
        raise asyncio.CancelledError


async def _rings(layer: Any, inbox: str, stream: MessageStream) -> None:
    try:
        while True:
            ring = await layer.receive(inbox)
            if ring.get("type") == EVENT_TYPE:
                stream.ring(ring["event"])
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # the layer failed: the stream cannot know what it misses
        stream.end(exc)


async def _revocation(revoked: asyncio.Event, stream: MessageStream) -> None:
    await revoked.wait()
    stream.end(_token_revoked() if stream.credential is None else _revoked(stream.credential))
