"""The docs' generated tables: the server's error codes and the client's own codes.

Each table sits between ``<!-- NAME:begin -->`` and ``<!-- NAME:end -->`` in exactly one of
README.md and docs/*.md, and is rendered from the code: the error table from
``agentchat.core.rules.errors``, the client's codes from ``agentchat.client.errors``.
``tests/project/test_docs.py`` fails while one is stale; this rewrites them:

    .venv/bin/python -m tests.docs_tables --write
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def rendered_tables() -> dict[str, str]:
    """Marker name -> the table as the code renders it."""
    from agentchat.client.errors import client_codes_markdown
    from agentchat.core.rules.errors import error_table_markdown

    return {
        "error-table": error_table_markdown(),
        "client-codes": client_codes_markdown(),
    }


def doc_files() -> list[Path]:
    """README.md and the docs pages: every markdown file the docs tests read."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def markers(name: str) -> tuple[str, str]:
    return f"<!-- {name}:begin -->\n", f"<!-- {name}:end -->"


def table_homes(name: str) -> list[Path]:
    begin, _ = markers(name)
    return [path for path in doc_files() if begin in path.read_text()]


def current(name: str) -> tuple[Path, str]:
    """The file holding table ``name`` and the table as written there."""
    homes = table_homes(name)
    assert len(homes) == 1, f"table {name!r} should be in exactly one doc file, is in {homes}"
    text = homes[0].read_text()
    begin, end = markers(name)
    assert end in text, f"{homes[0]}: {begin.strip()} without {end}"
    return homes[0], text[text.index(begin) + len(begin) : text.index(end)]


def write() -> list[str]:
    """Rewrite every stale table in place; the names of the files changed."""
    changed = []
    for name, table in rendered_tables().items():
        path, old = current(name)
        if old != table:
            begin, _ = markers(name)
            text = path.read_text()
            start = text.index(begin) + len(begin)
            path.write_text(text[:start] + table + text[start + len(old) :])
            changed.append(f"{path.relative_to(ROOT)} ({name})")
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentchat.settings")
    import django

    django.setup()
    if args == ["--write"]:
        changed = write()
        print("rewrote " + ", ".join(changed) if changed else "the tables are up to date")
        return 0
    if args:
        print("usage: python -m tests.docs_tables [--write]", file=sys.stderr)
        return 2
    stale = [name for name, table in rendered_tables().items() if current(name)[1] != table]
    print("stale: " + ", ".join(stale) if stale else "the tables are up to date")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
