"""What the client writes to a terminal, made safe: ``terminal(text)``.

Every field the client prints comes from a server it does not trust: an escape sequence in a
message body or a channel topic could set the window title, write the clipboard or clear the
screen, and a bidirectional control could make a line read other than it is. ``terminal``
shows each such character visibly escaped (``\\x1b``, ``\\u202e``) instead: the C0 and C1
controls (but the line breaks and tabs ``keep`` names), DEL, the line and paragraph
separators, the bidirectional controls and the invisible format characters, and lone
surrogates (which a JSON ``\\ud800`` escape can carry and no terminal can print).

``as_json=True`` escapes them as JSON's ``\\u001b`` instead, which leaves a JSON text the same
JSON (they are only ever inside its strings) and so keeps ``--json`` output exact.
"""

from __future__ import annotations

import re

# Bidirectional embeddings, overrides and isolates, the Arabic letter mark; zero-width
# spaces, joiners and marks, the word joiner and invisible operators, the byte-order mark.
_INVISIBLE = "\u202a-\u202e\u2066-\u2069\u200b-\u200f\u2060-\u2064\ufeff\u061c\u2028\u2029"
_UNSAFE = re.compile(f"[\x00-\x1f\x7f-\x9f{_INVISIBLE}\ud800-\udfff]")


def _plain(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json(ch: str) -> str:
    return f"\\u{ord(ch):04x}"


def terminal(text: str, *, keep: str = "\n\t", as_json: bool = False) -> str:
    """``text`` with every character a terminal would act on, or hide, shown escaped; the
    characters of ``keep`` (by default newline and tab, for bodies) are left as they are.
    Pass ``keep=""`` for a field that must stay on one line (a name, a title)."""
    escape = _json if as_json else _plain

    def one(match: re.Match[str]) -> str:
        ch = match.group()
        return ch if ch in keep else escape(ch)

    return _UNSAFE.sub(one, text)


def line(text: object) -> str:
    """A field of one line (a name, a title, an error message): ``terminal`` keeping nothing."""
    return terminal(str(text), keep="")


_SURROGATE = re.compile("[\ud800-\udfff]")


def sendable(value: object) -> object:
    """``value`` (decoded JSON) with each lone surrogate of its strings and keys replaced by
    U+FFFD: a JSON ``\\ud800`` escape from the server carries one, and no UTF-8 can, so the MCP
    server could not write it (its writer raised, and the server died). Everything else as it
    is: structured content stays the server's data."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {sendable(key): sendable(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [sendable(item) for item in value]
    return value
