"""Revocation ends live sessions (DESIGN §5): parked waits and websockets.

A session opened with a token registers here (``token_watch``) and gets an ``asyncio.Event``
that is set once the token is revoked. One watcher task per event loop learns of revocations
two ways:

- a ring: ``token_revoke`` rings the ``REVOCATIONS_GROUP`` on commit, which the watcher joins
  once for the whole process; through Redis this reaches every process at once;
- a look in the database every AGENTCHAT_REVOCATION_CHECK_SECONDS for the tokens of the open
  sessions (one query, however many sessions), because a ring is at most once and cannot leave
  a process on the in-memory layer (``manage.py revoke_agent_tokens`` runs in a process of its
  own).

Sessions also check the token in the transaction that moves a cursor (``token_is_live``), so a
revoked token never moves one, whatever the watcher has seen so far; and a stream checks its
credential before it delivers (``credential_live``, or ``credentials_gone`` in the very read of
what it sends), so nothing posted after a revocation committed reaches the revoked token.

A browser's session is a credential too (``Credential(session_key=...)``): signing out rings
the same group (``session_end``) and the look finds the session row gone or expired. Rings
carry a digest of the session key, never the key (a cookie's value).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import weakref
from collections.abc import AsyncIterator, Callable, Iterable
from dataclasses import dataclass
from importlib import import_module
from typing import Any, TypeVar

from channels.layers import get_channel_layer
from django.conf import settings
from django.utils import timezone

from agentchat.core.db.transactions import run_db
from agentchat.core.live.layer import inbox_close
from agentchat.core.live.push import EVENT_TYPE, group_name, push_on_commit
from agentchat.core.models import ApiToken

logger = logging.getLogger(__name__)

REVOCATIONS_GROUP = group_name("tokens", 0)
REVOKED_KIND = "token.revoked"
SESSION_ENDED_KIND = "session.ended"
K = TypeVar("K", int, str)

_CHECK_CHUNK = 500  # token ids per query (SQLite bounds the number of parameters)

# A watched credential: a token's id, or ``session:<digest>`` for a browser's session.
WatchKey = int | str


def session_watch_key(session_key: str) -> str:
    return "session:" + hashlib.sha256(session_key.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Credential:
    """What a live session authenticated with: a token (its id) or a browser's session (its
    key). Exactly one of the two is set."""

    token_id: int | None = None
    session_key: str | None = None

    @property
    def key(self) -> WatchKey:
        if self.token_id is not None:
            return self.token_id
        assert self.session_key is not None
        return session_watch_key(self.session_key)


def session_end(session_key: str | None) -> None:
    """Ring the end of a browser's session (signing out) to its live connections, on commit
    (at once outside a transaction). Its streams also find the session row gone themselves."""
    if session_key:
        push_on_commit(
            REVOCATIONS_GROUP,
            {"kind": SESSION_ENDED_KIND, "keys": [session_watch_key(session_key)]},
        )


def session_signed_out(sender: Any, request: Any = None, **kwargs: Any) -> None:
    """Receiver of Django's ``user_logged_out`` (the dashboard's and the admin's sign-out),
    sent before the session is flushed: its live connections end as a revoked token's do."""
    session = getattr(request, "session", None)
    session_end(getattr(session, "session_key", None))


def _not_live(wanted: list[K], live_of: Callable[[list[K]], Iterable[K]]) -> set[K]:
    """Those of ``wanted`` that ``live_of`` (a query over one chunk) does not return, asked
    _CHECK_CHUNK at a time."""
    live: set[K] = set()
    for start in range(0, len(wanted), _CHECK_CHUNK):
        live.update(live_of(wanted[start : start + _CHECK_CHUNK]))
    return set(wanted) - live


def sessions_ended(session_keys: Iterable[str]) -> set[str]:
    """Of ``session_keys``, those whose session is gone (signed out) or expired. Sync.

    One query per chunk on a database session engine (ours); any other engine is asked per
    key (``SessionStore.exists``)."""
    wanted = sorted(set(session_keys))
    store = import_module(settings.SESSION_ENGINE).SessionStore
    model = store.get_model_class() if hasattr(store, "get_model_class") else None
    if model is None:
        return {key for key in wanted if not store().exists(key)}
    now = timezone.now()
    return _not_live(
        wanted,
        lambda chunk: model.objects.filter(session_key__in=chunk, expire_date__gt=now).values_list(
            "session_key", flat=True
        ),
    )


def credentials_gone(credentials: Iterable[Credential]) -> set[WatchKey]:
    """The watch keys of ``credentials`` that no longer authenticate (a revoked or deleted
    token, an ended session). Sync: run it on the database pool."""
    tokens: set[int] = set()
    sessions: dict[str, Credential] = {}
    for credential in credentials:
        if credential.token_id is not None:
            tokens.add(credential.token_id)
        elif credential.session_key is not None:
            sessions[credential.session_key] = credential
    gone: set[WatchKey] = set(tokens_revoked(tokens)) if tokens else set()
    if sessions:
        gone.update(sessions[key].key for key in sessions_ended(sessions))
    return gone


def tokens_revoked(token_ids: Iterable[int]) -> set[int]:
    """Of ``token_ids``, those revoked or gone. Sync: run it on the database pool."""
    return _not_live(
        sorted(set(token_ids)),
        lambda chunk: ApiToken.objects.filter(pk__in=chunk, revoked_at__isnull=True).values_list(
            "pk", flat=True
        ),
    )


def token_is_live(token_id: int) -> bool:
    """Whether the token still authenticates (sync; call it inside the write transaction)."""
    return ApiToken.objects.filter(pk=token_id, revoked_at__isnull=True).exists()


class _Watcher:
    """The sessions of one event loop, by token id, and the task that ends them."""

    def __init__(self) -> None:
        self.sessions: dict[WatchKey, set[asyncio.Event]] = {}
        self.credentials: dict[WatchKey, Credential] = {}
        self.task: asyncio.Task[None] | None = None
        self.subscribed = asyncio.Event()

    def open(self, credential: Credential) -> asyncio.Event:
        revoked = asyncio.Event()
        self.sessions.setdefault(credential.key, set()).add(revoked)
        self.credentials[credential.key] = credential
        if self.task is None or self.task.done():
            self.subscribed = asyncio.Event()
            self.task = asyncio.get_running_loop().create_task(self.run())
        return revoked

    def close(self, key: WatchKey, revoked: asyncio.Event) -> None:
        events = self.sessions.get(key)
        if events is not None:
            events.discard(revoked)
            if not events:
                del self.sessions[key]
                self.credentials.pop(key, None)

    def revoke(self, keys: Iterable[WatchKey]) -> None:
        for key in keys:
            self.credentials.pop(key, None)
            for event in self.sessions.pop(key, ()):
                event.set()

    async def run(self) -> None:
        """Runs for the life of the loop once a session has opened: it holds one inbox in the
        revocations group and looks in the database only while sessions are open."""
        layer = get_channel_layer()
        loop = asyncio.get_running_loop()
        interval = settings.AGENTCHAT_REVOCATION_CHECK_SECONDS
        inbox = None
        receiving: asyncio.Future[Any] | None = None
        try:
            if layer is not None:
                try:
                    inbox = await layer.new_channel()
                    await layer.group_add(REVOCATIONS_GROUP, inbox)
                except Exception:  # the database looks still end revoked sessions
                    logger.exception("joining the revocations group failed")
            self.subscribed.set()
            next_check = loop.time() + interval
            while True:
                if receiving is None and inbox is not None:
                    # Never cancelled while the watcher runs: a cancelled receive makes the
                    # Redis layer drop the inbox's subscription.
                    receiving = asyncio.ensure_future(layer.receive(inbox))
                waiting = {receiving} if receiving is not None else set()
                remaining = max(0.0, next_check - loop.time())
                if waiting:
                    await asyncio.wait(waiting, timeout=remaining)
                else:
                    await asyncio.sleep(remaining)
                if receiving is not None and receiving.done():
                    done, receiving = receiving, None
                    try:
                        ring = done.result()
                    except Exception:  # a broken layer connection: retry at the next turn
                        logger.exception("receiving revocation rings failed")
                        await asyncio.sleep(min(interval, 1.0))
                        continue
                    event = ring.get("event", {}) if ring.get("type") == EVENT_TYPE else {}
                    if event.get("kind") == REVOKED_KIND:
                        self.revoke(event.get("token_ids", ()))
                    elif event.get("kind") == SESSION_ENDED_KIND:
                        self.revoke(event.get("keys", ()))
                if loop.time() >= next_check:
                    next_check = loop.time() + interval
                    if self.sessions:
                        try:
                            watched = list(self.credentials.values())
                            self.revoke(await run_db(credentials_gone, watched))
                        except Exception:  # the next look retries
                            logger.exception("checking the live sessions' tokens failed")
        finally:
            self.subscribed.set()  # never leave a session waiting on a watcher that is gone
            if receiving is not None:
                receiving.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await receiving
            if inbox is not None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(inbox_close(layer, inbox, [REVOCATIONS_GROUP]))


_watchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Watcher] = (
    weakref.WeakKeyDictionary()
)


def _watcher() -> _Watcher:
    loop = asyncio.get_running_loop()
    watcher = _watchers.get(loop)
    if watcher is None:
        watcher = _watchers[loop] = _Watcher()
    return watcher


@contextlib.asynccontextmanager
async def credential_watch(credential: Credential | None) -> AsyncIterator[asyncio.Event]:
    """``async with credential_watch(credential) as revoked:`` ``revoked`` is set once the
    token is revoked or the session ended; no credential gets an event that is never set."""
    if credential is None:
        yield asyncio.Event()
        return
    watcher = _watcher()
    revoked = watcher.open(credential)
    # Joined before the session goes on, so a revocation from now on rings it.
    await watcher.subscribed.wait()
    try:
        yield revoked
    finally:
        watcher.close(credential.key, revoked)


def token_watch(token_id: int | None) -> contextlib.AbstractAsyncContextManager[asyncio.Event]:
    """``credential_watch`` of a token (None: a session without one, never revoked here)."""
    return credential_watch(None if token_id is None else Credential(token_id=token_id))


class _Checks:
    """The delivery checks of one event loop's turn, made in one query (however many streams
    ask), as the cursor moves are."""

    def __init__(self) -> None:
        self.pending: dict[WatchKey, tuple[Credential, list[asyncio.Future[bool]]]] = {}

    async def live(self, credential: Credential) -> bool:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        if not self.pending:
            loop.call_soon(lambda: asyncio.ensure_future(self.flush()))
        self.pending.setdefault(credential.key, (credential, []))[1].append(future)
        return await future

    async def flush(self) -> None:
        batch, self.pending = self.pending, {}
        try:
            gone = await run_db(credentials_gone, [credential for credential, _ in batch.values()])
        except Exception as exc:  # the stream fails (and is reconnected), it is not revoked
            for _, futures in batch.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        if gone:
            _watcher().revoke(gone)
        for key, (_, futures) in batch.items():
            for future in futures:
                if not future.done():
                    future.set_result(key not in gone)


_checks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Checks] = weakref.WeakKeyDictionary()


async def credential_live(credential: Credential) -> bool:
    """Whether ``credential`` still authenticates, read from the database after the call (so
    true only if no revocation had committed when this was called); batched with the other
    checks of this loop's turn."""
    loop = asyncio.get_running_loop()
    checks = _checks.get(loop)
    if checks is None:
        checks = _checks[loop] = _Checks()
    return await checks.live(credential)
