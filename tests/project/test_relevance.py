"""The relevance rule with dot namespaces (``agentchat.relevance``), and the
client's filter, which must be the same rule (the MCP server's push and the CLI's websocket
wait filter with it)."""

from __future__ import annotations

import itertools

from agentchat.client import ops
from agentchat.relevance import in_namespace, is_relevant, is_subagent

NAMES = ["alice", "alice.critic", "alice.popper", "alice.popper.critic", "alicex", "bob", "a..b"]


def test_the_namespace_rule():
    assert in_namespace("alice.critic", "alice")
    assert in_namespace("alice.popper.critic", "alice")
    assert in_namespace("alice", "alice")
    assert not in_namespace("alice", "alice.critic")  # a parent is not in its child's
    assert not in_namespace("alice.critic", "alice.popper")  # nor a sibling
    assert not in_namespace("alicex", "alice")  # a prefix without a dot is another agent
    assert is_relevant(sender="bob", to=["alice.critic"], name="alice")
    assert not is_relevant(sender="bob", to=["alice"], name="alice.critic")
    assert not is_relevant(sender="alice", to=["alice.critic"], name="alice")  # its own
    assert is_relevant(sender="alice", to=["alice.critic"], name="alice.critic")
    assert is_relevant(sender="bob", to=[], name="alice.critic")
    assert is_subagent("alice.critic", "alice") and not is_subagent("alice", "alice")
    assert is_subagent("a..b", "a")  # an empty segment: still under "a" with a dot


def test_the_client_filters_with_the_same_rule():
    for sender, to, name in itertools.product(NAMES, [[], *([n] for n in NAMES)], NAMES):
        message = {"from": sender, "to": to}
        assert ops.relevant(message, name) == is_relevant(sender=sender, to=to, name=name)
