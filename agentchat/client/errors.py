"""The client's error type, its exit families and the codes only a client can meet.

A server error carries the server's stable code (``agentchat.core.errors``); its exit status
follows the reference CLI's families (REFERENCE-CLI §5), computed here from the code alone
because the client may not import the server's table (it imports Django). A test keeps
``exit_family`` equal to the server's table for every code it declares.

Codes of the client's own (``CLIENT_CODES``) name what happens before or around a request: the
server cannot be reached, the configuration is bad, a usage error, a wait that timed out.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_PLAIN = 1
EXIT_USAGE = 2  # also every TASK_/LEASE_/EVENT_ code and a wait that timed out
EXIT_CLAIM_LOST = 3
EXIT_INTERRUPTED = 130

# Server codes whose family is not their prefix's (the server table's fourth column).
_EXIT_OVERRIDES = {"INVALID_SEQ": EXIT_USAGE, "INVALID_TIMEOUT": EXIT_USAGE}

# (code, exit status, meaning): the README's client table is this one.
CLIENT_CODES: dict[str, tuple[int, str]] = {
    "SERVER_UNREACHABLE": (EXIT_PLAIN, "no server answers at the configured URL"),
    "SERVER_TIMEOUT": (EXIT_PLAIN, "the server took longer to answer than the client waits"),
    "BAD_RESPONSE": (EXIT_PLAIN, "the server's answer is not an AgentChat JSON body"),
    "CONFIG_INVALID": (EXIT_PLAIN, "the config file, a URL or a token is malformed"),
    "USAGE": (EXIT_USAGE, "a command-line argument is missing or malformed"),
    "TASK_INVALID_COMMAND": (EXIT_USAGE, "`agentchat task` with an unknown subcommand"),
    "TASK_INVALID_ARGUMENT": (EXIT_USAGE, "a `task` argument is missing or malformed"),
    "BODY_EMPTY": (EXIT_PLAIN, "post read an empty body from stdin"),
    "BODY_UNREADABLE": (EXIT_PLAIN, "post could not read its --body-file (or stdin) as UTF-8"),
    "WAIT_TIMEOUT": (EXIT_USAGE, "wait saw no new relevant message before its --timeout"),
    "INTERRUPTED": (EXIT_INTERRUPTED, "cancelled by the user (Ctrl-C)"),
}


def client_codes_markdown() -> str:
    """The README's table of the client's codes (a test keeps the README equal to this)."""
    lines = ["| code | exit | meaning |", "| --- | --- | --- |"]
    lines += [
        f"| `{code}` | {exit_} | {meaning} |" for code, (exit_, meaning) in CLIENT_CODES.items()
    ]
    return "\n".join(lines) + "\n"


def exit_family(code: str) -> int:
    """The exit status of an error code, as the reference CLI's families give it."""
    if code in CLIENT_CODES:
        return CLIENT_CODES[code][0]
    if code in _EXIT_OVERRIDES:
        return _EXIT_OVERRIDES[code]
    if code.startswith(("TASK_", "LEASE_", "EVENT_")):
        return EXIT_USAGE
    if code == "MARKER_ALREADY_CLAIMED":
        return EXIT_CLAIM_LOST
    return EXIT_PLAIN


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
    """``text`` with every line break and control character turned into a space, so an error
    quoting hostile input stays one line on a terminal."""
    return "".join(" " if _control(ch) else ch for ch in text)


def _control(ch: str) -> bool:
    return ord(ch) < 0x20 or 0x7F <= ord(ch) < 0xA0 or ch in "\u2028\u2029"
