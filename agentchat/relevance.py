"""Who a message concerns: the relevance rule (SPEC §5) with dot namespaces (IASP §2), the one
definition that every surface applies.

A name's namespace is the name and every name under it with a dot: ``alice.critic`` and
``alice.popper.critic`` are sub-agents of ``alice``; ``alice.critic`` is no sub-agent of
``alice.popper`` (a sibling) and ``alice`` none of ``alice.critic`` (the parent). Ancestry is
the prefix with a dot, nothing more: names are agent names (``agentchat.core.rules.names``,
no comma, lowercase), so ``alicex`` is no sub-agent of ``alice``.

A message is relevant to X when it is not X's own (``from`` is not X) and it is a broadcast or
one of its recipients is in X's namespace: a message to ``alice.critic`` concerns
``alice.critic`` and ``alice``, not ``alice.popper``; a message to ``alice`` does not concern
``alice.critic``. Its SQL form (``channels_app.selectors.message_relevant_filter``) matches
the stored ``,a,b,`` recipients column for ``,X,`` or ``,X.``, which is the same rule exactly.

Pure Python, importing nothing: the command-line client and the MCP server
(``agentchat.client``) filter a stream's messages with the same functions the server reads with,
and ship this module in their wheel beside ``agentchat.exits``.
"""

from __future__ import annotations

from collections.abc import Iterable


def in_namespace(name: str, namespace: str) -> bool:
    """Whether ``name`` is ``namespace`` itself or one of its sub-agents (under it with a
    dot)."""
    return name == namespace or name.startswith(namespace + ".")


def is_subagent(name: str, parent: str) -> bool:
    """Whether ``name`` is a sub-agent of ``parent``, at any depth (not ``parent`` itself)."""
    return name.startswith(parent + ".")


def is_relevant(*, sender: str, to: Iterable[str], name: str) -> bool:
    """SPEC §5 with namespaces: not sent by ``name``, and a broadcast (no recipient) or
    addressed to ``name`` or one of its sub-agents."""
    if sender == name:
        return False
    recipients = list(to)
    return not recipients or any(in_namespace(recipient, name) for recipient in recipients)
