"""The reference CLI (``agent-chat-plugin`` 0.7.5) for interop tests: where it is installed and
how to run it against a folder.

The suite does not install the reference: tests that use it run when a virtualenv holding it is
found (``AGENTCHAT_REFERENCE_VENV``, which ``.ci/run`` sets after installing
``requirements-reference.txt``; else the bench's cache ``/tmp/agentchat-bench-refvenv``), are
skipped otherwise, and fail under CI when it is missing (``require_reference``).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

from tests.conftest import require_service

REF_VENV = Path(
    os.environ.get("AGENTCHAT_REFERENCE_VENV")
    or Path(tempfile.gettempdir()) / "agentchat-bench-refvenv"
)
REF_CLI = REF_VENV / "bin" / "agent-chat"
REF_PYTHON = REF_VENV / "bin" / "python"


def require_reference() -> None:
    """Skip without the reference; under CI (AGENTCHAT_REQUIRE_SERVICES=1) fail instead."""
    require_service(
        "the reference CLI",
        REF_CLI.exists(),
        f"not installed in {REF_VENV} (set AGENTCHAT_REFERENCE_VENV; requirements-reference.txt)",
    )


def ref(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``agent-chat --root ROOT ARGS...`` in UTC, its output as text."""
    return subprocess.run(
        [str(REF_CLI), "--root", str(root), *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=60,
        env={**os.environ, "TZ": "UTC"},
    )


# The conformance script the team wrote while observing the reference (shared/reference/scripts,
# kept here as it is): run with REF_PYTHON, ``verify_root.py ROOT --strict`` exits 0 when the
# reference reads every artefact of a folder.
VERIFY_ROOT = Path(__file__).resolve().parent / "fixtures" / "verify_root.py"
