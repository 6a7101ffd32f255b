"""The CLI's commands, one module per family (``messages``, ``tasks``, ``locks``, ``state``),
and what they share: the one way they print.

Every line the CLI writes goes through ``out`` (text, made terminal-safe by
``agentchat.client.safe.terminal``, newlines and tabs kept) or ``out_json`` (a JSON text, the
characters a terminal would act on JSON-escaped, so it stays the same JSON). A command is a
function ``(client, args) -> exit status | None``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agentchat.client import ops
from agentchat.client.api import Client, seg
from agentchat.client.safe import terminal

Command = Callable[[Client, argparse.Namespace], int | None]


def out(chunk: str) -> None:
    """Write text to stdout, terminal-safe (newlines and tabs kept)."""
    sys.stdout.write(terminal(chunk))


def out_json(text: str) -> None:
    """Write a JSON text (the server's as it came, or ours) and a newline, terminal-safe."""
    sys.stdout.write(terminal(text, as_json=True) + "\n")


def answer_out(args: argparse.Namespace, answer: Any, text: Callable[[Any], str]) -> None:
    """A verb's answer shown: with ``--json`` the server's JSON text as it came (``out_json``),
    else ``text(answer)``, the verb's line for it (``out``)."""
    if args.json:
        out_json(answer)
    else:
        out(text(answer))


def dump(body: Any) -> None:
    out_json(json.dumps(body, ensure_ascii=False))


def err(line: str) -> None:
    """Write one line to stderr, terminal-safe."""
    print(terminal(line, keep=""), file=sys.stderr)


def chan(args: argparse.Namespace) -> str:
    return f"channels/{seg(args.channel)}/"


def values(items: Sequence[str] | None) -> list[str]:
    """A repeatable option's values, each split on ``,``, blanks dropped (as the reference)."""
    return [part.strip() for item in items or [] for part in item.split(",") if part.strip()]


def duration(value: float) -> float | str:
    """A duration as sent: a number, or the text of one JSON cannot carry (NaN, infinities),
    which the server refuses with its *_INVALID_DURATION code."""
    return value if math.isfinite(value) else str(value)


def check_as(client: Client, claimed: str | None) -> None:
    if claimed is not None:
        ops.identity(client, claimed)
