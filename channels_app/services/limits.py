"""The sizes and spellings a channel write checks, shared by the services."""

from __future__ import annotations

from channels_app.models import Channel

BROADCAST_WORDS = {"all", "*"}

# A message whose JSON is at most this big rides along with its push, so subscribers need not
# read it back; bigger ones are fetched by seq.
PUSH_INLINE_LIMIT = 16 * 1024

MESSAGE_ID_MAX = 128

TITLE_MAX = 1000

STATUS_MAX = 100

# Bounded so that the channel.updated audit, which carries the before and after of each
# changed field, always fits in a message body.
TOPIC_MAX = 4096

MEMBERS_MAX = 1000

RECIPIENTS_MAX = MEMBERS_MAX  # a message's `to`: as many as a roster may hold

VISIBILITIES = tuple(Channel.Visibility.values)

# EP-0118's signal types (its signals table's CHECK), in its order.
SIGNAL_TYPES = ("inform", "query", "delegate", "ack", "warn", "sleep_event", "sleep_request")
