"""The fences' sidecar (docs/folder.md): a sync writes ``<channel>/_fences.json`` beside the
reference's records (which stay as they were: no ``fence`` key), the reference still reads the
folder (``verify_root.py --strict``), and an import restores every fence from it."""

from __future__ import annotations

import json
import subprocess
from io import StringIO

import pytest
from django.core.management import call_command

from channels_app.models import Channel
from locks_app.models import LockFence, PathLock
from tasks_app.models import Lease, Task
from tests.reference import REF_PYTHON, VERIFY_ROOT, require_reference

pytestmark = pytest.mark.django_db

TASKS = "/api/v1/channels/ours/tasks/"
LOCKS = "/api/v1/channels/ours/locks/"


@pytest.fixture
def fenced(api_for):
    """Task T claimed twice (fence 2, leased by bob), task U never claimed, a lock that was
    taken and released (fence 1) and one held (fence 2)."""
    alice, bob = api_for("alice"), api_for("bob")
    assert alice.post("/api/v1/channels/", {"name": "ours"}, format="json").status_code == 201
    for task_id in ("T", "U"):
        assert alice.post(TASKS, {"id": task_id, "title": "t"}, format="json").status_code == 201
    assert alice.post(f"{TASKS}T/claim/", {}, format="json").json()["fence"] == 1
    assert alice.post(f"{TASKS}T/release/", {}, format="json").status_code == 200
    assert bob.post(f"{TASKS}T/claim/", {}, format="json").json()["fence"] == 2
    first = alice.post(LOCKS, {"paths": ["src/a.py"]}, format="json").json()
    assert alice.delete(f"{LOCKS}{first['lock_id']}/").status_code == 200
    held = bob.post(LOCKS, {"paths": ["docs/"]}, format="json").json()
    assert held["fence"] == 2
    return held["lock_id"]


def test_sync_writes_the_sidecar_and_import_restores_every_fence(fenced, tmp_path):
    from agentchat.folder.sync import folder_sync

    folder_sync(root=tmp_path, channel="ours")
    folder = tmp_path / "ours"
    assert json.loads((folder / "_fences.json").read_text()) == {
        "lock_fence": 2,
        "locks": {fenced: 2},
        "tasks": {"T": 2},
    }
    for record in [*folder.glob("tasks/*.json"), *folder.glob("claims/*.json")]:
        assert "fence" not in json.loads(record.read_text()), record
    assert "fence" not in json.loads((folder / f"locks/{fenced}.json").read_text())

    Channel.objects.get(name="ours").delete()
    call_command("import_folder", "--root", str(tmp_path), stdout=StringIO())
    channel = Channel.objects.get(name="ours")
    assert dict(Task.objects.filter(channel=channel).values_list("task_id", "fence")) == {
        "T": 2,
        "U": 0,
    }
    assert Lease.objects.get(task__channel=channel).fence == 2
    assert PathLock.objects.get(channel=channel).fence == 2
    assert LockFence.objects.get(channel=channel).last_fence == 2
    # The next claim and lock go on from there, never back.
    folder_sync(root=tmp_path, channel="ours")
    assert json.loads((folder / "_fences.json").read_text())["lock_fence"] == 2


def test_a_folder_without_fences_has_no_sidecar(api_for, tmp_path):
    from agentchat.folder.sync import folder_sync

    alice = api_for("alice")
    assert alice.post("/api/v1/channels/", {"name": "ours"}, format="json").status_code == 201
    assert alice.post(TASKS, {"id": "T", "title": "t"}, format="json").status_code == 201
    folder_sync(root=tmp_path, channel="ours")
    assert not (tmp_path / "ours" / "_fences.json").exists()


@pytest.mark.parametrize(
    "sidecar",
    [
        '{"tasks": {"T": true}}',
        '{"tasks": {"T": 1.0}}',
        '{"lock_fence": -1}',
        '{"x": 1}',
        "[]",
        # Past what an import takes (10^17): the next claims could not be sent back (or, at
        # 2^63-1, stored at all: a 500).
        '{"tasks": {"T": 9223372036854775807}}',
        '{"lock_fence": 1000000000000000000}',
        '{"lock_fence": 100000000000000001}',
    ],
)
def test_a_malformed_sidecar_refuses_the_import(fenced, tmp_path, sidecar):
    from agentchat.folder.sync import folder_sync

    folder_sync(root=tmp_path, channel="ours")
    (tmp_path / "ours" / "_fences.json").write_text(sidecar)
    Channel.objects.get(name="ours").delete()
    with pytest.raises(Exception, match="IMPORT_INVALID_FENCES"):
        call_command("import_folder", "--root", str(tmp_path), stdout=StringIO())
    assert not Channel.objects.filter(name="ours").exists()


@pytest.mark.parametrize("kind", ["link", "dir"])
def test_a_sidecar_that_is_no_regular_file_refuses_the_import(fenced, tmp_path, kind):
    """A link (or a folder) in place of the sidecar is refused like any record, never
    skipped: skipping it imported every fence as 0, so a holder's old fence was current
    again after the next claim."""
    from agentchat.folder.sync import folder_sync

    folder_sync(root=tmp_path, channel="ours")
    sidecar = tmp_path / "ours" / "_fences.json"
    kept = tmp_path / "kept.json"
    sidecar.rename(kept)
    if kind == "link":
        sidecar.symlink_to(kept)
    else:
        sidecar.mkdir()
    Channel.objects.get(name="ours").delete()
    code = "IMPORT_PATH_OUTSIDE_ROOT" if kind == "link" else "IMPORT_UNREADABLE"
    with pytest.raises(Exception, match=code):
        call_command("import_folder", "--root", str(tmp_path), stdout=StringIO())
    assert not Channel.objects.filter(name="ours").exists()


def test_a_sidecar_at_the_largest_fence_leaves_later_claims_and_locks_working(
    fenced, api_for, tmp_path
):
    """A sidecar at the import's bound: the next claim and the next lock still take the next
    fence (the bound used to be the column's own maximum, and every later claim was a 500)."""
    from agentchat.folder.fences import IMPORT_FENCE_MAX
    from agentchat.folder.sync import folder_sync

    folder_sync(root=tmp_path, channel="ours")
    sidecar = tmp_path / "ours" / "_fences.json"
    data = json.loads(sidecar.read_text())
    data["tasks"]["U"] = data["lock_fence"] = IMPORT_FENCE_MAX
    sidecar.write_text(json.dumps(data))
    Channel.objects.get(name="ours").delete()
    call_command("import_folder", "--root", str(tmp_path), stdout=StringIO())
    carol = api_for("carol")
    claimed = carol.post(f"{TASKS}U/claim/", {}, format="json")
    assert claimed.status_code == 200 and claimed.json()["fence"] == IMPORT_FENCE_MAX + 1
    locked = carol.post(LOCKS, {"paths": ["new/x"]}, format="json")
    assert locked.status_code == 201 and locked.json()["fence"] == IMPORT_FENCE_MAX + 1


def test_the_reference_reads_a_folder_with_the_sidecar(fenced, tmp_path):
    from agentchat.folder.sync import folder_sync

    require_reference()
    folder_sync(root=tmp_path)
    result = subprocess.run(
        [str(REF_PYTHON), str(VERIFY_ROOT), str(tmp_path), "--strict"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "FAIL" not in result.stdout
