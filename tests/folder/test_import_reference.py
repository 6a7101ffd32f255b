"""Import, then the reference CLI reads a folder written from the imported rows (with the
folder's renderers, as a sync writes it) exactly as it reads the folder that was imported."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentchat.folder.sync import folder_sync
from tests.folder.test_import import extract, import_folder
from tests.reference import REF_PYTHON, VERIFY_ROOT, ref, require_reference

pytestmark = pytest.mark.django_db


def _reads(root: Path) -> dict[str, str]:
    """What the reference prints for each read of the sample's channels (paths masked)."""
    runs = {
        "channels": ["channels"],
        "roster backend": ["roster", "backend"],
        "peek backend": ["peek", "backend", "-n", "1000"],
        "peek design": ["peek", "design", "-n", "1000"],
        "read backend --as dave": ["read", "backend", "--as", "dave", "--peek"],
        "read backend --as bob": ["read", "backend", "--as", "bob", "--peek"],
        "read design --as alice": ["read", "design", "--as", "alice", "--peek"],
        "task list backend": ["task", "list", "backend"],
        "task list design": ["task", "list", "design"],
        "task show T-0002": ["task", "show", "backend", "T-0002"],
        "task show T-0003": ["task", "show", "backend", "T-0003"],
        "check api/payments.py": ["check", "backend", "api/payments.py"],
        "check web/checkout.tsx": ["check", "design", "web/checkout.tsx"],
        "event read backend": ["event", "read", "backend"],
        "state backend": ["state", "backend"],
        "state design --strict": ["state", "design", "--strict"],
    }
    out = {}
    for label, args in runs.items():
        run = ref(root, *args, check=False)
        out[label] = f"{run.returncode}\n{run.stdout}{run.stderr}".replace(str(root), "<root>")
    return out


def test_the_reference_reads_the_imported_rows_as_it_read_the_folder(tmp_path):
    require_reference()
    source = extract(tmp_path / "source")
    import_folder(source)
    written = tmp_path / "written"
    folder_sync(root=written)
    expected = _reads(extract(tmp_path / "pristine"))
    got = _reads(written)
    for label in expected:
        assert got[label] == expected[label], label
    assert expected["task list backend"].startswith("0\n")
    run = subprocess.run(
        [str(REF_PYTHON), str(VERIFY_ROOT), str(written), "--strict"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr
