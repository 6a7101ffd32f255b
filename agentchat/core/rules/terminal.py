"""What a management command writes to a terminal, made safe: ``terminal_safe(text)``.

A command's output can echo what others wrote (a file name in an imported folder, a channel's
name, an error naming a hostile path): an escape sequence in it could set the window title or
clear the screen, a bidirectional control make the line read other than it is. Every control
character (C0, DEL, C1), line or paragraph separator, format character (Unicode category Cf:
the bidirectional controls, zero-width characters) and lone surrogate is shown escaped
(``\\x1b``, ``\\u202e``). The server's own copy of the client's ``terminal`` (the server
may not import the client).
"""

from __future__ import annotations

import unicodedata

_UNSAFE = frozenset(("Cc", "Cf", "Cs", "Zl", "Zp"))


def _escaped(ch: str, keep: str) -> str:
    if ch in keep or unicodedata.category(ch) not in _UNSAFE:
        return ch
    code = ord(ch)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else f"\\U{code:08x}"
    )


def terminal_safe(text: object, *, keep: str = "") -> str:
    """``text`` (``str()`` of it) with every character a terminal would act on or hide shown
    escaped; the characters of ``keep`` (``"\\n"`` for several lines) are left as they are."""
    return "".join(_escaped(ch, keep) for ch in str(text))
