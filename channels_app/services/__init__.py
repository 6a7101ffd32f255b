"""Every write of channels_app, one transaction each (``write_atomic``).

``message_post`` is also the audit path of tasks_app and locks_app: called inside their
transaction, the audit message commits with the change or not at all.

The package, along its seams (each imports only those above it in this list):

- ``limits``: the sizes and spellings a write checks (title, topic, members, recipients);
- ``groups``: the channel-layer groups a write rings (a channel's, the roster's);
- ``messages``: recipients, ``message_post`` in its steps (validate, idempotent id, insert
  with its seq, push), id conflicts, seq allocation, the sender's kind;
- ``loopguard``: the loop guard's counter row per channel, taken by ``message_post`` (imported
  by ``messages``);
- ``events``: ``event_post`` and ``audit_post``, both messages;
- ``channels``: create and update, roster, visibility, topic (an update posts its audit);
- ``cursors``: read pages and the cursor's set, ack and compare-and-set;
- ``claims``: ``marker_claim``;
- ``signals``: EP-0118's ``signal_post`` (a message with a type) and ``signal_ack`` (the
  per-message read markers);
- ``whiteboard``: EP-0118's ``whiteboard_write`` and ``whiteboard_delete``, audited;
- ``imports``: channels, messages, presence, cursors and markers from a reference folder;
- ``direct``: the direct channel of a pair of agents (HTTP v1), and the refusal of anything
  but envelopes in it (imported by ``messages`` and ``channels``, importing ``groups`` only);
- ``mailbox``: an agent's inbox and address-book counters (commit-ordered seqs);
- ``envelopes``: HTTP v1 envelopes (message, receipt, contact share) delivered to an inbox;
- ``contacts``: HTTP v1 address books (a card saved, a share accepted).

Reads are in ``channels_app.selectors`` (the cursor's position: ``cursor_get``), the HTTP v1
ones in ``channels_app.inbox``, ``channels_app.monitor`` and ``channels_app.contacts``. Public names
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
from channels_app.services.contacts import contact_put, contact_share_accept
from channels_app.services.cursors import (
    CursorMove,
    ReadPage,
    cursor_ack,
    cursors_compare_and_set,
    message_read,
    read_page_body,
)
from channels_app.services.direct import direct_channel_for, direct_channel_get
from channels_app.services.envelopes import (
    Sent,
    contact_share_send,
    envelope_send,
    receipt_send,
)
from channels_app.services.events import PostedEvent, audit_post, event_post
from channels_app.services.groups import MONITOR_GROUP, ROSTER_GROUP, channel_group, inbox_group
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
    "MONITOR_GROUP",
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
    "Sent",
    "SignalAck",
    "audit_post",
    "channel_create",
    "channel_group",
    "channel_import",
    "channel_update",
    "contact_put",
    "contact_share_accept",
    "contact_share_send",
    "cursor_ack",
    "cursors_compare_and_set",
    "cursors_import",
    "direct_channel_for",
    "direct_channel_get",
    "envelope_send",
    "event_post",
    "inbox_group",
    "marker_claim",
    "markers_import",
    "members_normalize",
    "message_kind_of",
    "message_post",
    "message_read",
    "messages_import",
    "presence_import",
    "read_page_body",
    "receipt_send",
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
