"""Channels, messages, read cursors, marker claims (SPEC §2-§8), presence, EP-0118's
per-message signal reads and the channel whiteboard; the HTTP v1 inboxes (deliveries, their
counters) and address books (contacts, their events)."""

from __future__ import annotations

from typing import Any

from django.db import models
from django.db.models import Lookup
from django.db.models.functions import Lower

from agentchat.core.models import Agent
from agentchat.relevance import is_relevant
from channels_app.approval_rule import ANSWER_CONDITION, APPROVAL_REQUEST


class NameListHas(Lookup):
    """``members__has_name="bob"``: the JSON list holds the string ``bob`` (exactly).

    Django's ``contains`` on a JSONField is not available on SQLite; this is the one membership
    test in SQL, so the channel list filters members-only channels in the database.
    """

    lookup_name = "has_name"

    def as_sql(self, compiler: Any, connection: Any) -> tuple[str, tuple[Any, ...]]:
        lhs, lhs_params = self.process_lhs(compiler, connection)
        # The name is bound as a plain string, not JSON-encoded as JSONField would prepare it.
        params = (*lhs_params, self.rhs)
        if connection.vendor == "sqlite":
            return (
                f"EXISTS (SELECT 1 FROM json_each({lhs}) AS _names "
                "WHERE _names.type = 'text' AND _names.value = %s)",
                params,
            )
        if connection.vendor == "postgresql":
            return f"({lhs} @> jsonb_build_array(%s::text))", params
        raise NotImplementedError(f"has_name is not implemented on {connection.vendor}")


class Channel(models.Model):
    class Visibility(models.TextChoices):
        OPEN = "open", "open"
        MEMBERS = "members", "members only"

    name = models.CharField(max_length=64, unique=True)
    topic = models.TextField(blank=True)
    # The roster. On an open channel it is informational, as in the reference; on a
    # members-only channel it is who may see the channel at all (channels_app.selectors).
    members = models.JSONField(default=list, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=64, blank=True)
    # The sequence counter: incremented in the same transaction that inserts the message.
    last_seq = models.BigIntegerField(default=0)
    visibility = models.CharField(
        max_length=16, choices=Visibility.choices, default=Visibility.OPEN
    )
    maintainer = models.CharField(max_length=64, blank=True)
    # Times as an imported folder spelled them (``{field: text}``), re-emitted while they still
    # name the stored instant (``agentchat.core.rules.records.ts_spelled``).
    spellings = models.JSONField(default=dict, blank=True)
    # A direct channel (HTTP v1): the two agents whose envelopes it holds, sorted and joined by
    # a space (``"alice bob"``; ``"alice alice"`` for one's notes to itself); null for every
    # other channel. Made by ``services.direct_channel_for`` only: members-only with the pair
    # as its roster, fixed, and every message in it an envelope with its Delivery.
    direct_pair = models.CharField(max_length=129, null=True, blank=True, unique=True)

    class Meta:
        ordering = ["name"]
        constraints = [
            # `Review` and `review` would collide in a synced folder on some filesystems.
            models.UniqueConstraint(Lower("name"), name="channel_name_ci_unique"),
            models.CheckConstraint(condition=models.Q(last_seq__gte=0), name="channel_seq_gte_0"),
        ]

    def __str__(self) -> str:
        return self.name


Channel._meta.get_field("members").register_lookup(NameListHas)


class Message(models.Model):
    class Kind(models.TextChoices):
        MESSAGE = "message", "message"
        EVENT = "event", "event"
        AUDIT = "audit", "audit"

    # The HTTP v1 envelope id: globally unique, client-supplied ids make retries idempotent.
    id = models.CharField(primary_key=True, max_length=128)
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="messages")
    seq = models.BigIntegerField()
    # An agent name; messages imported from a reference folder may carry free text.
    sender = models.CharField(max_length=200, db_index=True)
    # Provenance: whether a person or an agent sent it, taken from the sender's identity on
    # the server when it was posted (Agent.kind), never from the request. Always "agent" for
    # an imported message: a file can claim anything, and no identity here vouches for it.
    sender_kind = models.CharField(
        max_length=8, choices=[("agent", "agent"), ("human", "human")], default="agent"
    )
    # Came from a folder (``import_folder``), not posted here: its text is the file's, its
    # sender and status are what the file says, and it never counts as a person's answer
    # (``approval_rule``) nor as the server's audit (its kind is never ``audit``).
    imported = models.BooleanField(default=False)
    # What an imported file's ``sender_kind`` key said ("human"; "" when it said nothing):
    # written back by the folder sync where the file had it, so an import round-trips, and
    # read as nothing else (no provenance, no approval).
    claimed_sender_kind = models.CharField(max_length=8, blank=True, default="")
    # Recipients; [] is a broadcast.
    to = models.JSONField(default=list, blank=True)
    # ",bob,carol," (or "" for a broadcast): lets the database pre-filter relevance.
    recipients = models.TextField(blank=True, default="")
    reply_to = models.BigIntegerField(null=True, blank=True)
    ts = models.DateTimeField()
    # The timestamp exactly as an imported file spelled it; empty for messages posted here.
    ts_text = models.CharField(max_length=64, blank=True, default="")
    status = models.CharField(max_length=100, default="discussion")
    title = models.TextField()
    body = models.TextField(blank=True, default="")
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    conversation_id = models.CharField(max_length=128, blank=True, default="")
    correlation_id = models.CharField(max_length=128, blank=True, default="")
    data = models.JSONField(null=True, blank=True)
    content_type = models.CharField(max_length=200, blank=True, default="")
    metadata = models.JSONField(default=dict, blank=True)
    # The bytes of the message's JSON (``records.message_json``) when it was stored: what a
    # read's page and a stream's batch plan with, reading no text. A plan only: a page checks
    # the bytes it renders (a JSON column read back may be spelled a few bytes differently).
    json_size = models.PositiveIntegerField(default=0)
    # Not a field: records.message_json keeps the rendered bytes here once made.
    _json: bytes
    # Frontmatter keys an imported file carried beyond the reference's, in file order, as
    # ``[[key, value], ...]``, kept verbatim: the folder writes them back after the reference's
    # keys and the state summary classifies by them (``type: decision``) as the reference does.
    frontmatter = models.JSONField(default=list, blank=True)
    # EP-0118: a signal is a message with a type (channels_app.signals.SIGNAL_TYPES); "" for
    # every other message. Read per message with SignalRead, beside the cursor.
    signal_type = models.CharField(max_length=16, blank=True, default="")

    class Meta:
        ordering = ["channel_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "seq"], name="message_channel_seq_unique"),
            models.CheckConstraint(condition=models.Q(seq__gte=1), name="message_seq_gte_1"),
            # Set by whatever makes the row (records.message_json_size): 0 would plan as free.
            models.CheckConstraint(
                condition=models.Q(json_size__gt=0), name="message_json_size_gt_0"
            ),
        ]
        indexes = [
            # Reading events by type (selectors.events_read) seeks here instead of walking the
            # channel's messages: an index of the event messages only.
            models.Index(
                fields=["channel", "status", "seq"],
                condition=models.Q(kind="event"),
                name="message_event_status_seq",
            ),
            # Approvals (channels_app.approvals): the requests, and the answers that may decide
            # one (channels_app.approval_rule). Both cover every column the pending query reads
            # of them, so that deciding what is pending never reads a row: on SQLite a column
            # stored after a long body is reached through the body's overflow pages.
            models.Index(
                fields=["channel", "seq", "ts", "id", "sender", "json_size", "status"],
                condition=models.Q(status=APPROVAL_REQUEST),
                name="message_approval_requests",
            ),
            models.Index(
                fields=["channel", "reply_to", "sender", "status", "sender_kind", "imported"],
                condition=ANSWER_CONDITION,
                name="message_approval_deciders",
            ),
            # A read of signals (channels_app.signals) walks the channel's signals only.
            models.Index(
                fields=["channel", "seq"],
                condition=~models.Q(signal_type=""),
                name="message_signal_seq",
            ),
        ]

    def __str__(self) -> str:
        return f"#{self.seq} {self.title}"

    def is_relevant_to(self, name: str) -> bool:
        """SPEC §5 with namespaces (``agentchat.relevance``): not sent by ``name``,
        and a broadcast or addressed to ``name`` or one of its sub-agents."""
        return is_relevant(sender=self.sender, to=self.to, name=name)


class Cursor(models.Model):
    """The last seq an agent consumed in a channel (SPEC §8)."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="cursors")
    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="cursors")
    seq = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["agent", "channel"], name="cursor_agent_channel_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent} @ {self.channel} #{self.seq}"


class MarkerClaim(models.Model):
    """The legacy ``claim <channel> <marker>`` (SPEC §5): one owner, decided by a unique row."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="marker_claims")
    marker = models.CharField(max_length=128)
    owner = models.CharField(max_length=64)
    claimed_at = models.DateTimeField(auto_now_add=True)
    # The marker file's text when the claim came from a reference folder (import), written back
    # by the sync as ``task-<id>.CLAIMED-<owner>.md``; empty for a claim made here.
    text = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["channel_id", "marker"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "marker"], name="marker_claim_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.marker} -> {self.owner}"


class Presence(models.Model):
    """Per sender of a channel: its last activity and its latest status event (presence).

    One row per (channel, sender), written in the transaction of each message the sender posts
    (``services.message_post``: ``last_seq``, ``last_sent_at``) and of each event
    (``services.event_post``: the status fields, or the capability fields), so presence is a
    read of a few rows, never a walk of the channel. Per channel rather than on the Agent
    (DESIGN §4 sketches ``Agent.last_seen``): a status is posted to a channel, and what an
    agent does in a members-only channel must not show through a property every channel shows.
    """

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="presence")
    # The sender as messages spell it (imported folders may carry free text).
    agent = models.CharField(max_length=200)
    last_seq = models.BigIntegerField()  # the last message or event it sent
    last_sent_at = models.DateTimeField()
    # From the latest event of either type.
    harness = models.TextField(blank=True, default="")
    # The latest status event: status "" when there is none.
    status = models.CharField(max_length=16, blank=True, default="")
    # None: the event had no detail ("" is a detail of its own).
    detail = models.TextField(null=True, blank=True)  # noqa: DJ001
    status_ts = models.CharField(max_length=64, blank=True, default="")  # as the event spelled it
    status_seq = models.BigIntegerField(null=True, blank=True)
    # The latest capability event.
    primitives = models.JSONField(null=True, blank=True)
    capability_seq = models.BigIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["channel_id", "agent"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "agent"], name="presence_channel_agent"),
        ]

    def __str__(self) -> str:
        return f"{self.agent} @ {self.channel_id}: {self.status or '-'}"


class SignalRead(models.Model):
    """EP-0118's read marker: ``agent`` acknowledged the signal ``message`` (``ack_signals``).
    Per agent and message, so a broadcast acknowledged by one agent stays unread for every
    other; the cursor (read, wait, ack) is another matter and moves independently."""

    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="signal_reads")
    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="signal_reads")
    read_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["agent", "message"], name="signal_read_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id} read {self.message_id}"


class WhiteboardEntry(models.Model):
    """EP-0118's whiteboard (``session_state``): a channel's key/value store. Keys are
    case-sensitive record ids (``channels_app.whiteboard``); the value is any JSON, bounded."""

    channel = models.ForeignKey(Channel, on_delete=models.CASCADE, related_name="whiteboard")
    key = models.CharField(max_length=128)
    # The value as the compact JSON text it was written as: read back exactly (PostgreSQL's
    # jsonb would reorder an object's keys), JSON null included.
    value_json = models.TextField()
    # Its bytes in UTF-8: what the channel's total is capped by.
    size = models.PositiveIntegerField()
    updated_by = models.CharField(max_length=64)
    updated_at = models.DateTimeField()
    # The seq of the audit message of the last write (whiteboard.written).
    audit_seq = models.BigIntegerField()

    class Meta:
        ordering = ["channel_id", "key"]
        constraints = [
            models.UniqueConstraint(fields=["channel", "key"], name="whiteboard_channel_key"),
        ]

    def __str__(self) -> str:
        return f"{self.channel_id}/{self.key}"


class LoopGuard(models.Model):
    """The loop guard's counter of a channel (``channels_app.services.loopguard``): the run of
    consecutive agent messages, each within the window of the one before, since the last human
    post or task or lock change. One row per channel, written by one upsert in the posting
    transaction (no scan of the messages). Times are epoch seconds, as the post budget's."""

    channel = models.OneToOneField(
        Channel, on_delete=models.CASCADE, primary_key=True, related_name="loop_guard"
    )
    run = models.IntegerField(default=0)
    # The seq of the run's first message, and its sender.
    run_from_seq = models.BigIntegerField(default=0)
    first_sender = models.CharField(max_length=64, blank=True)
    # Whether a sender other than the first posted in the run (one agent alone is no exchange).
    mixed = models.BooleanField(default=False)
    last_at = models.FloatField(null=True)
    # When the run crossed the threshold (the loop.suspected message's time); null: not flagged.
    flagged_at = models.FloatField(null=True)
    # The seq of the loop.suspected message, and whether the last upsert set the flag.
    flagged_seq = models.BigIntegerField(null=True)
    flag_new = models.BooleanField(default=False)

    def __str__(self) -> str:
        return f"{self.channel_id}: run {self.run}{' flagged' if self.flagged_at else ''}"


class Mailbox(models.Model):
    """An agent's HTTP v1 counters: its inbox's and its address book's next sequence numbers.

    Each is taken by one upsert in the transaction that writes the record it numbers
    (``services.envelopes``, ``services.contacts``), as a channel's ``last_seq`` is: on
    PostgreSQL the row lock makes the numbers commit-ordered (a delivery numbered after another
    commits after it, so a reader that saw ``n`` has seen everything below it), on SQLite the
    write transaction does. No row yet: both are 0."""

    agent = models.OneToOneField(
        Agent, on_delete=models.CASCADE, primary_key=True, related_name="mailbox"
    )
    inbox_tail = models.BigIntegerField(default=0)  # the next inbox seq_num
    # The last delivery's timestamp: each delivery's is the later of now and this, so that the
    # timestamps of one inbox never go back (the monitor orders by them).
    inbox_at = models.DateTimeField(null=True, blank=True)
    book_tail = models.BigIntegerField(default=0)  # the next address-book event's seq

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=models.Q(inbox_tail__gte=0, book_tail__gte=0),
                name="mailbox_tails_gte_0",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_id}: inbox {self.inbox_tail}, book {self.book_tail}"


class MonitorTail(models.Model):
    """The one row (id 1) holding the last monitor number given to a delivery
    (``Delivery.mseq``). Its lock serializes the numbering; it never goes back, even when
    deliveries are deleted with their agent, so a number is never given twice."""

    tail = models.BigIntegerField(default=0)

    def __str__(self) -> str:
        return f"monitor tail {self.tail}"


class Delivery(models.Model):
    """An HTTP v1 envelope, delivered to its one recipient's inbox under ``seq`` (the
    document's ``seq_num``, from 0, no gaps).

    The envelope's content is its ``message``, in the direct channel of the pair (so the
    channel views, search and the folder see it); what is the envelope's own is here: its id
    (unique per sender: the sender's, or the message's own id when the server made it), its
    kind, whether ``text`` was null, and the digest of the request that made it (a retry with
    the same id and content returns it; other content is ID_CONFLICT)."""

    class Kind(models.TextChoices):
        MESSAGE = "message", "message"
        CONTACT_SHARE = "contact.share", "contact.share"
        RECEIPT = "receipt", "receipt"

    # One delivery per message: the message is its key (and the monitor loads by it).
    message = models.OneToOneField(
        Message, on_delete=models.CASCADE, primary_key=True, related_name="delivery"
    )
    recipient = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="deliveries")
    seq = models.BigIntegerField()
    # The monitor's number (``services.monitorseq``): given once the delivery has committed,
    # in commit order across every inbox; null until then. The monitor reads by it.
    mseq = models.BigIntegerField(null=True, blank=True, unique=True)
    sender = models.CharField(max_length=64)
    envelope_id = models.CharField(max_length=128)
    kind = models.CharField(max_length=16, choices=Kind.choices, default=Kind.MESSAGE)
    has_text = models.BooleanField(default=False)
    delivered_at = models.DateTimeField()
    request_digest = models.CharField(max_length=64)

    class Meta:
        # No default ordering: a lookup by (sender, id) or (recipient, id) must use its own
        # index, not walk an inbox in seq order (SQLite picked that for an ORDER BY seq).
        constraints = [
            models.UniqueConstraint(fields=["recipient", "seq"], name="delivery_inbox_seq"),
            models.UniqueConstraint(fields=["sender", "envelope_id"], name="delivery_sender_id"),
            models.CheckConstraint(condition=models.Q(seq__gte=0), name="delivery_seq_gte_0"),
        ]
        indexes = [
            # A receipt or an acceptance finds what the caller received by its id.
            models.Index(fields=["recipient", "envelope_id"], name="delivery_received_id"),
        ]

    def __str__(self) -> str:
        return f"{self.recipient_id} #{self.seq} {self.kind} {self.envelope_id}"


class Contact(models.Model):
    """A card in an agent's address book as it stands: the latest ``contact.upsert`` event of
    that contact id (``ContactEvent``), written with it."""

    owner = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="contacts")
    contact_id = models.CharField(max_length=64)
    card = models.JSONField()
    event_seq = models.BigIntegerField()
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ["owner_id", "contact_id"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "contact_id"], name="contact_owner_id"),
        ]

    def __str__(self) -> str:
        return f"{self.owner_id}: {self.contact_id}"


class ContactEvent(models.Model):
    """An address book's log: each ``contact.upsert``, from a PUT of the owner's (``put``) or
    from accepting a contact share it received (``share``: who shared it, the share's id).
    Numbered from 0 per owner (``Mailbox.book_tail``)."""

    class Source(models.TextChoices):
        PUT = "put", "put"
        SHARE = "share", "share"

    owner = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="contact_events")
    seq = models.BigIntegerField()
    contact_id = models.CharField(max_length=64)
    card = models.JSONField()
    source = models.CharField(max_length=8, choices=Source.choices)
    share_from = models.CharField(max_length=64, blank=True, default="")
    share_id = models.CharField(max_length=128, blank=True, default="")
    created_at = models.DateTimeField()

    class Meta:
        ordering = ["owner_id", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["owner", "seq"], name="contact_event_owner_seq"),
            # A share is accepted once: accepting it again answers the first acceptance.
            models.UniqueConstraint(
                fields=["owner", "share_from", "share_id"],
                condition=models.Q(source="share"),
                name="contact_event_share_once",
            ),
            models.CheckConstraint(condition=models.Q(seq__gte=0), name="contact_event_seq_gte_0"),
        ]

    def __str__(self) -> str:
        return f"{self.owner_id} #{self.seq} {self.contact_id}"
