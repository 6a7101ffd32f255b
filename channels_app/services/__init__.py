"""Every write of channels_app, one transaction each (``write_atomic``).

``message_post`` is also the audit path of tasks_app and locks_app: called inside their
transaction, the audit message commits with the change or not at all.

The package, along its seams (each imports only those above it in this list):

- ``limits``: the sizes and spellings a write checks (title, topic, members, recipients);
- ``groups``: the channel-layer groups a write rings (a channel's, the roster's);
- ``messages``: recipients, ``message_post`` in its steps (validate, idempotent id, insert
  with its seq, push), id conflicts, seq allocation, the sender's kind;
- ``events``: ``event_post`` and ``audit_post``, both messages;
- ``channels``: create and update, roster, visibility, topic (an update posts its audit);
- ``cursors``: read pages and the cursor's set, ack and compare-and-set;
- ``claims``: ``marker_claim``;
- ``signals``: EP-0118's ``signal_post`` (a message with a type) and ``signal_ack`` (the
  per-message read markers);
- ``whiteboard``: EP-0118's ``whiteboard_write`` and ``whiteboard_delete``, audited;
- ``imports``: channels, messages, presence, cursors and markers from a reference folder.

Reads are in ``channels_app.selectors`` (the cursor's position: ``cursor_get``). Public names
are imported here, so callers use ``channels_app.services.<name>``.
"""

from __future__ import annotations

from channels_app.services.channels import (
    EVENT_CHANNEL_UPDATED,
    channel_create,
    channel_update,
    members_normalize,
    roster_check,
    topic_check,
    visibility_check,
)
from channels_app.services.claims import marker_claim
from channels_app.services.cursors import (
    CursorMove,
    ReadPage,
    cursor_ack,
    cursors_compare_and_set,
    message_read,
    read_page_body,
)
from channels_app.services.events import PostedEvent, audit_post, event_post
from channels_app.services.groups import ROSTER_GROUP, channel_group
from channels_app.services.imports import (
    IMPORT_BATCH,
    ImportedMessage,
    ImportedPresence,
    channel_import,
    cursors_import,
    markers_import,
    message_kind_of,
    messages_import,
    presence_import,
)
from channels_app.services.limits import (
    BROADCAST_WORDS,
    MEMBERS_MAX,
    MESSAGE_ID_MAX,
    PUSH_INLINE_LIMIT,
    RECIPIENTS_MAX,
    SIGNAL_TYPES,
    STATUS_MAX,
    TITLE_MAX,
    TOPIC_MAX,
    VISIBILITIES,
)
from channels_app.services.messages import message_post, recipients_column, recipients_normalize
from channels_app.services.signals import (
    ACK_IDS_MAX,
    SignalAck,
    signal_ack,
    signal_ids_check,
    signal_post,
    signal_type_check,
)
from channels_app.services.whiteboard import whiteboard_delete, whiteboard_write

__all__ = [
    "ACK_IDS_MAX",
    "BROADCAST_WORDS",
    "EVENT_CHANNEL_UPDATED",
    "IMPORT_BATCH",
    "MEMBERS_MAX",
    "MESSAGE_ID_MAX",
    "PUSH_INLINE_LIMIT",
    "RECIPIENTS_MAX",
    "ROSTER_GROUP",
    "SIGNAL_TYPES",
    "STATUS_MAX",
    "TITLE_MAX",
    "TOPIC_MAX",
    "VISIBILITIES",
    "CursorMove",
    "ImportedMessage",
    "ImportedPresence",
    "PostedEvent",
    "ReadPage",
    "SignalAck",
    "audit_post",
    "channel_create",
    "channel_group",
    "channel_import",
    "channel_update",
    "cursor_ack",
    "cursors_compare_and_set",
    "cursors_import",
    "event_post",
    "marker_claim",
    "markers_import",
    "members_normalize",
    "message_kind_of",
    "message_post",
    "message_read",
    "messages_import",
    "presence_import",
    "read_page_body",
    "recipients_column",
    "recipients_normalize",
    "roster_check",
    "signal_ack",
    "signal_ids_check",
    "signal_post",
    "signal_type_check",
    "topic_check",
    "visibility_check",
    "whiteboard_delete",
    "whiteboard_write",
]
