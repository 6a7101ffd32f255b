"""The docs hold together: generated tables are fresh, links land, examples name what exists.

README.md is the front door and docs/*.md the reference. A link is checked against the file
and, with ``#anchor``, against the target's headings by GitHub's anchor rules; the commands
the examples name (``make X``, ``manage.py X``, ``agentchat X``) are checked against the
Makefile, the management commands and the CLI's parser.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from pathlib import Path

import pytest

from tests.docs_tables import ROOT, current, doc_files, rendered_tables

FENCE = re.compile(r"^```.*?^```[ \t]*$", re.M | re.S)
LINK = re.compile(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def rel(path: Path) -> str:
    return str(path.relative_to(ROOT))


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: link markup gone, lowercase, punctuation dropped."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: Counter[str] = Counter()
    out = set()
    for line in FENCE.sub("", path.read_text()).split("\n"):
        m = re.match(r"^#{1,6} (.+?)\s*#*\s*$", line)
        if m:
            base = slug(m.group(1))
            out.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
    return out


def code_texts(path: Path) -> list[str]:
    """The code of a doc file: its fenced blocks and its inline code spans."""
    text = path.read_text()
    blocks = [m.group(0) for m in FENCE.finditer(text)]
    spans = re.findall(r"`([^`\n]+(?:\n[^`\n]+)?)`", FENCE.sub("", text))
    return blocks + spans


@pytest.mark.parametrize("name", ["error-table", "client-codes"])
def test_generated_tables_are_fresh(name):
    path, written = current(name)
    fresh = rendered_tables()[name]
    assert written == fresh, (
        f"{rel(path)}: the {name} table is stale; run `.venv/bin/python -m tests.docs_tables "
        f"--write`, or paste:\n{fresh}"
    )


def test_every_code_the_docs_name_is_declared():
    from agentchat.client.errors import CLIENT_CODES
    from agentchat.core.rules.errors import ERRORS

    named: dict[str, str] = {}
    for path in doc_files():
        for code in re.findall(r"`([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)`", path.read_text()):
            named.setdefault(code, rel(path))
    prefixes = ("AGENTCHAT_", "AGENT_CHAT_", "DB_", "DJANGO_")
    settings_like = {name for name in named if name.startswith(prefixes)}
    settings_like |= {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS", "LOG_LEVEL"}
    settings_like |= {"CSRF_TRUSTED_ORIGINS", "XDG_CONFIG_HOME"}
    undeclared = set(named) - settings_like - set(ERRORS) - set(CLIENT_CODES)
    assert sorted(f"{named[c]}: {c}" for c in undeclared) == []


def test_every_docs_page_starts_with_a_title_and_a_summary():
    pages = sorted((ROOT / "docs").glob("*.md"))
    assert len(pages) > 5
    for path in pages:
        lines = path.read_text().split("\n")
        assert lines[0].startswith("# "), f"{rel(path)}: no title"
        assert lines[1] == "", f"{rel(path)}: no blank line after the title"
        assert lines[2] and not lines[2].startswith(("#", "|", "-", "```", "<")), (
            f"{rel(path)}: the title is not followed by a summary paragraph"
        )


def test_every_relative_link_lands():
    broken = []
    for path in doc_files():
        for target in LINK.findall(FENCE.sub("", path.read_text())):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("/"):
                continue  # a URL, or a path on the running server
            file_part, _, anchor = target.partition("#")
            dest = (path.parent / file_part).resolve() if file_part else path
            if not dest.exists():
                broken.append(f"{rel(path)}: {target}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{rel(path)}: {target}: no such heading")
    assert broken == []


def test_every_page_is_on_the_map():
    index = (ROOT / "docs" / "README.md").read_text()
    front = (ROOT / "README.md").read_text()
    for path in sorted((ROOT / "docs").glob("*.md")):
        if path.name != "README.md":
            assert f"]({path.name})" in index, f"docs/README.md does not list {path.name}"
            assert f"](docs/{path.name})" in front, f"README.md does not list {path.name}"


def named(pattern: str) -> dict[str, str]:
    """What the docs' code names with ``pattern`` (one group), with a file naming each."""
    out: dict[str, str] = {}
    for path in doc_files():
        for code in code_texts(path):
            for name in re.findall(pattern, code, re.M):
                out.setdefault(name, rel(path))
    return out


def test_every_make_target_named_exists():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([A-Za-z][\w.-]*):", makefile, re.M))
    used = named(r"(?:^|[\s`;(&|])make ([a-z][\w-]*)")
    assert {"run", "test"} <= set(used)
    assert sorted(f"{where}: make {t}" for t, where in used.items() if t not in targets) == []


def test_every_management_command_named_exists():
    from django.core.management import get_commands

    commands = set(get_commands())
    used = named(r"manage\.py ([a-z][\w]*)")
    assert {"create_agent_token", "sync_folder", "import_folder"} <= set(used)
    assert sorted(f"{w}: manage.py {c}" for c, w in used.items() if c not in commands) == []


def cli_verbs() -> set[str]:
    """The top-level commands of the ``agentchat`` parser, from its public builder."""
    from agentchat.client import cli

    parser = cli.build_parser()
    verbs: set[str] = set()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            verbs |= set(action.choices)
    return verbs


def test_every_agentchat_verb_named_exists():
    verbs = cli_verbs()
    used = named(r"(?:^|[\s`/(])agentchat ([a-z][\w-]*)")
    assert {"init", "post", "wait", "mcp"} <= set(used)
    assert sorted(f"{w}: agentchat {v}" for v, w in used.items() if v not in verbs) == []


def test_the_link_checker_sees_a_broken_anchor(tmp_path):
    page = tmp_path / "a.md"
    page.write_text("# A page\n\n## Tasks and leases (`/api/v1/x/<name>/`)\n\n## Again\n## Again\n")
    assert anchors(page) == {"a-page", "tasks-and-leases-apiv1xname", "again", "again-1"}
    assert "tasks-and-leases" not in anchors(page)


def test_every_command_of_the_cli_table_is_a_verb():
    text = (ROOT / "docs" / "cli.md").read_text()
    rows = re.findall(r"^\| `([a-z][\w-]*)[^`]*` (?:·|\|)", text, re.M)
    assert len(rows) > 10
    assert sorted(set(rows) - cli_verbs()) == []
