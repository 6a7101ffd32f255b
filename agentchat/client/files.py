"""The client's one way to read a file it was pointed at: ``read_bounded``, at most a cap's
worth of bytes, the refusals in the caller's words."""

from __future__ import annotations

import sys
from pathlib import Path

from agentchat.client.errors import ClientError


def read_bounded(
    source: str | Path,
    limit: int,
    *,
    unreadable: tuple[str, str],
    too_large: tuple[str, str],
    dash_is_stdin: bool = False,
) -> bytes:
    """The bytes of the file ``source`` (``-`` with ``dash_is_stdin``: of stdin, none when
    there is no stdin), read no further than ``limit`` + 1 bytes. ``ClientError(code,
    f"{text}: {exc}")`` of ``unreadable = (code, text)`` when it cannot be read, and
    ``ClientError(*too_large)`` when it holds more than ``limit`` bytes."""
    try:
        if dash_is_stdin and str(source) == "-":
            raw = sys.stdin.buffer.read(limit + 1) if sys.stdin is not None else b""
        else:
            with open(source, "rb") as handle:
                raw = handle.read(limit + 1)
    except OSError as exc:
        code, text = unreadable
        raise ClientError(code, f"{text}: {exc}") from exc
    if len(raw) > limit:
        raise ClientError(*too_large)
    return raw
