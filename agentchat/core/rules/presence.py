"""The agent registry's pure rules (EP-0118 §1, §4): statuses, staleness, generated agent ids,
and the post rate's spelling.

Functions of their arguments: the registry's writes are ``agentchat.core.identity.registry``,
the post budget ``agentchat.core.identity.rates``. Importing nothing but the standard library,
so that the settings can parse ``AGENTCHAT_POST_RATE`` with ``rate_parse`` at start-up.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime

ACTIVE, IDLE, SLEEPING, STALE = "active", "idle", "sleeping", "stale"
# What a registration stores: ``stale`` is read from its heartbeat, never stored.
STORED_STATUSES = (ACTIVE, IDLE, SLEEPING)
# What a heartbeat may say (going idle is the handshake's, ``POST agents/idle/``).
HEARTBEAT_STATUSES = (ACTIVE, SLEEPING)
STATUSES = (*STORED_STATUSES, STALE)

HARNESS_MAX = 100
SUBSTRATE_MAX = 100
NOTE_MAX = 2000
CONVERSATION_ID_MAX = 200
RUN_TOKEN_MAX = 200
AGENT_NAME_MAX = 64
# The generated id's parts (the EP's ``{model_slug}_{sha256(conversation)[:8]}_{random_hex}``):
# the random part is 48 bits, so ids made for one parent never meet in practice (and the
# registry's primary key refuses the one that would).
SLUG_MAX = 24
HASH_HEX = 8
RANDOM_HEX = 12
_SLUG_OUTSIDE = re.compile(r"[^a-z0-9]+")


def presence_status(
    status: str, last_heartbeat: datetime, *, now: datetime, stale_seconds: float
) -> str:
    """The status a registration shows: its stored one, or ``stale`` once it has been silent
    for more than ``stale_seconds``."""
    if (now - last_heartbeat).total_seconds() > stale_seconds:
        return STALE
    return status


def is_live(status: str, last_heartbeat: datetime, *, now: datetime, stale_seconds: float) -> bool:
    """Whether a registration holds its agent's slot: heard from within ``stale_seconds`` and
    not idle (a session that said it finished has left; a sleeping one means to come back)."""
    return presence_status(status, last_heartbeat, now=now, stale_seconds=stale_seconds) not in (
        IDLE,
        STALE,
    )


def model_slug(harness: str, substrate: str) -> str:
    """The EP's ``model_slug``: the substrate (the model) or else the harness, lowercased, every
    run of other characters one ``_``, at most SLUG_MAX; ``agent`` when nothing is left."""
    slug = _SLUG_OUTSIDE.sub("_", (substrate or harness).lower()).strip("_")[:SLUG_MAX]
    return slug.strip("_") or "agent"


def agent_id_generate(
    *, parent: str, harness: str, substrate: str, conversation_id: str, random_hex: str = ""
) -> str | None:
    """A sub-agent id of ``parent`` in the EP's shape, ``<parent>.<slug>_<hash8>_<random>``:
    the hash is the conversation id's (a random one without it), the random part
    ``random_hex`` (fresh when empty). The slug is shortened to fit the 64 characters of an
    agent name, and left out when it cannot fit; None when even that is too long."""
    digest = (
        hashlib.sha256(conversation_id.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_HEX]
        if conversation_id
        else secrets.token_hex(HASH_HEX // 2)
    )
    tail = f"{digest}_{random_hex or secrets.token_hex(RANDOM_HEX // 2)}"
    if len(parent) + 1 + len(tail) > AGENT_NAME_MAX:
        return None
    room = AGENT_NAME_MAX - len(parent) - 1 - len(tail) - 1  # and the "_" after the slug
    slug = model_slug(harness, substrate)[: max(room, 0)].strip("_")
    return f"{parent}.{slug}_{tail}" if slug else f"{parent}.{tail}"


def namespace_root(name: str) -> str:
    """The top-level agent of a dotted name (``alice`` of ``alice.critic.x``)."""
    return name.split(".", 1)[0]


@dataclass(frozen=True)
class Rate:
    """``count`` posts per ``seconds``: a bucket of ``count`` that refills at count/seconds."""

    count: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.count / self.seconds

    def __str__(self) -> str:
        return f"{self.count}/{self.seconds:g}s"


_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60}
_UNITS |= {"h": 3600, "hour": 3600, "d": 86400, "day": 86400}
_RATE_RE = re.compile(r"([0-9]{1,9})/([0-9]{0,6})([a-z]+?)s?\Z")


def rate_parse(spec: str) -> Rate | None:
    """``N/period`` (``10/min``, ``600/h``, ``5/10s``; units s, sec, second, m, min, minute, h,
    hour, d, day, plural or not) as a Rate; None for "" (no limit). Raises ValueError."""
    text = spec.strip().lower()
    if not text:
        return None
    match = _RATE_RE.fullmatch(text)
    if match is None or match.group(3) not in _UNITS:
        raise ValueError(f"{spec!r} is not N/period (e.g. 10/min, 600/h, 5/10s)")
    count, multiple = int(match.group(1)), int(match.group(2) or 1)
    if count < 1 or multiple < 1:
        raise ValueError(f"{spec!r}: the count and the period must be at least 1")
    return Rate(count, float(multiple * _UNITS[match.group(3)]))
