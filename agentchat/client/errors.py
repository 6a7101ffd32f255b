"""The client's error type, its exit families and the codes only a client can meet.

A server error carries the server's stable code (``agentchat.core.rules.errors``); its exit status
is the reference CLI's family of the code (REFERENCE-CLI §5), from ``agentchat.exits``, the
one exit table the server's error table is built from too (the client cannot import the
server's: it imports Django).

Codes of the client's own (``CLIENT_CODES``) name what happens before or around a request: the
server cannot be reached, the configuration is bad, a usage error, a wait that timed out.
"""

from __future__ import annotations

from typing import Any

from agentchat import exits
from agentchat.client.safe import line
from agentchat.exits import EXIT_INTERRUPTED, EXIT_OK, EXIT_PLAIN, EXIT_USAGE

__all__ = ["EXIT_INTERRUPTED", "EXIT_OK", "EXIT_PLAIN", "EXIT_USAGE", "ClientError"]

# The EP-0118 verbs' refusal to guess who or where the caller is (its AmbiguousIdentityError).
EXIT_AMBIGUOUS = 4

# (code, exit status, meaning): the client table of docs/cli.md is this one.
CLIENT_CODES: dict[str, tuple[int, str]] = {
    "SERVER_UNREACHABLE": (EXIT_PLAIN, "no server answers at the configured URL"),
    "SERVER_TIMEOUT": (EXIT_PLAIN, "a call took longer than its deadline (--call-timeout)"),
    "BAD_RESPONSE": (EXIT_PLAIN, "the server's answer is not an AgentChat JSON body"),
    "RESPONSE_TOO_LARGE": (EXIT_PLAIN, "an answer of the server passed the client's size cap"),
    "CONFIG_INVALID": (EXIT_PLAIN, "the config file, a URL or a token is malformed"),
    "USAGE": (EXIT_USAGE, "a command-line argument is missing or malformed"),
    "TASK_INVALID_COMMAND": (EXIT_USAGE, "`agentchat task` with an unknown subcommand"),
    "TASK_INVALID_ARGUMENT": (EXIT_USAGE, "a `task` argument is missing or malformed"),
    "BODY_EMPTY": (EXIT_PLAIN, "post read an empty body from stdin"),
    "BODY_UNREADABLE": (EXIT_PLAIN, "post could not read its --body-file (or stdin) as UTF-8"),
    "WAIT_TIMEOUT": (EXIT_USAGE, "wait saw no new relevant message before its --timeout"),
    "INTERRUPTED": (EXIT_INTERRUPTED, "cancelled by the user (Ctrl-C)"),
    "AMBIGUOUS_IDENTITY": (
        EXIT_AMBIGUOUS,
        "an EP-0118 verb cannot tell which agent it acts as (two sources disagree, or several "
        "active agents under the token and none named)",
    ),
    "SESSION_REQUIRED": (EXIT_USAGE, "an EP-0118 verb found no session (channel) to act in"),
}


def client_codes_markdown() -> str:
    """The client's codes as docs/cli.md shows them (tests/project/test_docs.py keeps the page
    equal)."""
    lines = ["| code | exit | meaning |", "| --- | --- | --- |"]
    lines += [
        f"| `{code}` | {exit_} | {meaning} |" for code, (exit_, meaning) in CLIENT_CODES.items()
    ]
    return "\n".join(lines) + "\n"


def exit_family(code: str) -> int:
    """The exit status of an error code: a client code's own, else the server's family."""
    if code in CLIENT_CODES:
        return CLIENT_CODES[code][0]
    return exits.exit_family(code)


class ClientError(Exception):
    """A failure with a stable code: the server's error body, or one of ``CLIENT_CODES``.

    ``status`` is the HTTP status when the server answered, else None; ``transient`` says the
    request may be retried as it is (the connection failed or dropped, or the server said 503).
    """

    def __init__(
        self,
        code: str,
        message: str,
        detail: dict[str, Any] | None = None,
        exit_code: int | None = None,
        *,
        status: int | None = None,
        transient: bool = False,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.detail = detail or {}
        self.exit_code = exit_family(code) if exit_code is None else exit_code
        self.status = status
        self.transient = transient

    def line(self) -> str:
        """What the CLI prints on stderr: ``agentchat: CODE: message`` (one line)."""
        return "agentchat: " + one_line(f"{self.code}: {self.message}")


def one_line(text: str) -> str:
    """``text`` as one terminal-safe line (``agentchat.client.safe.line``): an error quoting
    hostile input neither breaks the line nor acts on the terminal."""
    return line(text)
