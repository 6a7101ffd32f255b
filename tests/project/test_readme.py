"""The set-up lines of the README and the docs that need no running server run as written (on a
database of their own): a newcomer copies them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands import own_sqlite_file
from tests.conftest import ROOT

pytestmark = own_sqlite_file  # its lines run on a database of their own

FENCE = re.compile(r"^```sh\n(.*?)^```", re.MULTILINE | re.DOTALL)


def sh_blocks() -> list[str]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return [block for page in pages for block in FENCE.findall(page.read_text())]


def block_with(needle: str) -> str:
    found = [block for block in sh_blocks() if needle in block]
    assert len(found) == 1, f"one sh block of the README and the docs holds {needle!r}"
    return found[0]


@pytest.fixture
def shell(tmp_path):
    """Runs README lines with bash in the project folder, on a migrated database of its own.
    ``.venv/bin/python`` is this interpreter (the same venv under ``make test``)."""
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "AGENTCHAT_DATA_DIR": str(tmp_path / "var"),
        "SECRET_KEY": "x" * 50,
    }

    def run(script: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace(".venv/bin/python", sys.executable)],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    migrated = run(".venv/bin/python manage.py migrate --noinput")
    assert migrated.returncode == 0, migrated.stderr
    return run


def test_the_createsuperuser_line_works_as_written(shell):
    run = shell(block_with("createsuperuser --noinput"))
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "Superuser created successfully."
    check = shell(
        ".venv/bin/python manage.py shell -c "
        '"from django.contrib.auth.models import User; '
        "print(User.objects.filter(is_superuser=True, username='admin').count())\""
    )
    assert check.stdout.strip().splitlines()[-1] == "1", check.stderr


def test_the_quick_starts_token_line_prints_a_token(shell):
    line = next(
        line
        for line in block_with(
            "TOKEN=$(.venv/bin/python manage.py create_agent_token alice)   #"
        ).splitlines()
        if "TOKEN=" in line
    )
    run = shell(line.split("#")[0] + '\necho "$TOKEN"')
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"ac_\S{20,}", run.stdout.strip()), run.stdout


def test_the_readme_s_token_line_exports_a_token(shell):
    readme = "\n".join(FENCE.findall((ROOT / "README.md").read_text()))
    line = next(text for text in readme.splitlines() if "export AGENT_CHAT_TOKEN=$(" in text)
    assert "alice" in line
    run = shell(line.split("#")[0].replace("alice", "dora") + '\necho "$AGENT_CHAT_TOKEN"')
    assert run.returncode == 0, run.stderr
    assert re.fullmatch(r"ac_\S{20,}", run.stdout.strip()), run.stdout
