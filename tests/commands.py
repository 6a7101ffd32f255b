"""Running ``manage.py`` in a child process, as an operator does (exit codes, output, no
traceback), against a database of the test's own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent


def manage_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """A bare environment: a SQLite file under ``tmp_path``, a throwaway secret key."""
    return {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "SECRET_KEY": "x" * 50,
        **extra,
    }


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


# A test whose processes run on a SQLite file of their own (``manage_env``, the README's lines,
# the launcher's): the very same scenario whichever database the suite runs on. The SQLite
# suite runs it; the PostgreSQL suite of .ci/run would only repeat it.
own_sqlite_file = pytest.mark.skipif(
    "postgresql" in settings.DATABASES["default"]["ENGINE"],
    reason="runs on a SQLite file of its own whatever the suite: the SQLite suite runs it",
)
