"""The statuses of the server's own audit messages: the one list.

Every audit message is posted through ``channels_app.services.audit_post``, which refuses an
event that is not named here, so this list is every status the server's audit trail uses (the
task and lease events of tasks_app, the path-lock events of locks_app, channels_app's
``channel.updated``, whiteboard writes and the loop guard's ``loop.suspected``, and the state's
``state.compacted``). A message posted by a client may not take one of them
(``STATUS_RESERVED``): a reader of the channel, the reference CLI's readers and the state
summary among them, would take it for the server's record of a change. HTTP v1's kinds
(``ENVELOPE_STATUSES``: ``receipt``, ``contact.share``, ``contact.upsert``) are reserved the
same way, for the envelopes' messages.
"""

from __future__ import annotations

import unicodedata

AUDIT_STATUSES: tuple[str, ...] = (
    # tasks_app: tasks and leases (REFERENCE-CLI §3.13)
    "task.created",
    "task.updated",
    "lease.claimed",
    "lease.renewed",
    "lease.completed",
    "lease.released",
    "lease.recovered",
    "lease.force_released",
    # locks_app: path locks
    "path.locked",
    "path.lock.unlocked",
    "path.lock.recovered",
    "path.lock.force_released",
    # channels_app: a change of topic, members or visibility
    "channel.updated",
    # agentchat.state: a stored summary
    "state.compacted",
    # channels_app: the whiteboard (EP-0118)
    "whiteboard.written",
    "whiteboard.deleted",
    # channels_app: the loop guard (agents answering each other without end)
    "loop.suspected",
)
RESERVED = frozenset(AUDIT_STATUSES)

# HTTP v1's own kinds (channels_app.services.envelopes): the message of a receipt or a contact
# share takes its kind as its status, and an address book's log is of ``contact.upsert``
# events. Only an envelope's message may take one (``message_post(envelope=True)``): a client's
# ``receipt`` would read as a delivery receipt, its ``contact.share`` as a shared card.
ENVELOPE_STATUSES: tuple[str, ...] = ("receipt", "contact.share", "contact.upsert")
ENVELOPE_RESERVED = frozenset(ENVELOPE_STATUSES)


def _families(statuses: tuple[str, ...]) -> tuple[str, ...]:
    # A status's family is its text up to and including its last dot (``lease.claimed`` →
    # ``lease.``). ``path.locked``'s would be ``path.``, which would swallow the ``path.lock.``
    # family and every other ``path.*`` a client may use: a family that is a strict prefix of
    # another stays reserved by its exact statuses only.
    prefixes = {status.rsplit(".", 1)[0] + "." for status in statuses if "." in status}
    return tuple(
        sorted(p for p in prefixes if not any(o != p and o.startswith(p) for o in prefixes))
    )


# ``task.``, ``lease.``, ``path.lock.``, ``channel.``, ``state.``: a client's ``lease.expired``
# would read as the server's record as surely as ``lease.claimed``.
RESERVED_PREFIXES: tuple[str, ...] = _families(AUDIT_STATUSES)
# ``contact.``: a client's ``contact.shared`` would read as a share.
ENVELOPE_PREFIXES: tuple[str, ...] = _families(ENVELOPE_STATUSES)


def status_key(status: str) -> str:
    """``status`` as the reserved names are compared: compatibility-normalized (NFKC, so
    ``task.created`` spelled with a full-width t, U+FF54, or ``channel.updated`` with a
    full-width full stop, U+FF0E, is the reserved status), case-folded and stripped.
    Confusables across scripts (a Cyrillic U+0455 for the s of ``task.created``) are not
    folded: that needs Unicode's confusables table, which the project does not ship."""
    return unicodedata.normalize("NFKC", status).casefold().strip()


def is_reserved(status: str) -> bool:
    """Whether a client's ``status`` would read as one of the server's audit statuses: one of
    them or of their families (``RESERVED_PREFIXES``), compared by ``status_key``."""
    key = status_key(status)
    return key in RESERVED or key.startswith(RESERVED_PREFIXES)


def is_envelope_status(status: str) -> bool:
    """Whether ``status`` would read as one of HTTP v1's own kinds (``ENVELOPE_STATUSES``) or
    of their families, compared by ``status_key``: only an envelope's message may take it."""
    key = status_key(status)
    return key in ENVELOPE_RESERVED or key.startswith(ENVELOPE_PREFIXES)
