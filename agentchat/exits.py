"""The command-line exit families of the error codes: the one table, for the server and the
client alike.

Pure Python, importing nothing: the server's error table (``agentchat.core.rules.errors``) takes
each code's exit status from ``exit_family``, and so does the client (``agentchat.client.errors``),
which cannot import the server's table (it imports Django) and ships this module in its wheel.

The families are the reference CLI's (REFERENCE-CLI §5): 1 for plain errors (every
``PATH_LOCK_*`` and ``STATE_*`` code among them), 2 for ``TASK_*``, ``LEASE_*``, ``EVENT_*`` and
usage errors, 3 for a lost marker claim, 130 for Ctrl-C; ours: 4 an ambiguous identity, 5 a
fence that is not current (``agentchat fence check``).
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_PLAIN = 1
EXIT_USAGE = 2  # the reference's family of TASK_/LEASE_/EVENT_ codes and argument errors
EXIT_CLAIM_LOST = 3
# ``agentchat fence check``: the fence is not current (expired or stale). 4 is the EP-0118
# verbs' ambiguous identity (``agentchat.client.errors``).
EXIT_NOT_CURRENT = 5
EXIT_INTERRUPTED = 130

# Codes whose family is not their prefix's: argument errors of a seq, a wait's timeout, a cursor.
EXIT_OVERRIDES: dict[str, int] = {
    "INVALID_SEQ": EXIT_USAGE,
    "INVALID_TIMEOUT": EXIT_USAGE,
    "INVALID_CURSOR": EXIT_USAGE,
    "MONITOR_CURSOR_RETIRED": EXIT_USAGE,
}


def exit_family(code: str) -> int:
    """The exit status of an error code, as the reference CLI's families give it."""
    if code in EXIT_OVERRIDES:
        return EXIT_OVERRIDES[code]
    if code.startswith(("TASK_", "LEASE_", "EVENT_")):
        return EXIT_USAGE
    if code == "MARKER_ALREADY_CLAIMED":
        return EXIT_CLAIM_LOST
    return EXIT_PLAIN
