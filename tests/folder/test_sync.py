"""The folder sync: its layout and bytes, determinism, incrementality (counted), repair of a
folder someone touched, removals, the root it refuses, one channel at a time."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from django.utils import timezone

from agentchat.core.rules.errors import AppError
from agentchat.folder.files import TEMP_SUFFIX
from agentchat.folder.render import message_bytes, meta_bytes
from agentchat.folder.sync import SYNC_DIR, folder_sync
from agentchat.models import StateSnapshot
from channels_app.models import Channel, Message
from channels_app.services import channel_create
from locks_app.services import lock_release
from tasks_app.services.leases import lease_release
from tests.folder import scenario

pytestmark = pytest.mark.django_db


@pytest.fixture
def replaced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names every ``os.replace`` of the test published: the files written, counted
    independently of the sync's own report."""
    names: list[str] = []
    real = os.replace

    def counting(src: str | Path, dst: str | Path) -> None:
        if SYNC_DIR not in Path(dst).parts:
            names.append(str(dst))
        real(src, dst)

    monkeypatch.setattr(os, "replace", counting)
    return names


def test_sync_writes_the_reference_layout(tmp_path: Path) -> None:
    channel = scenario.build()
    [lock_id] = scenario.lock_ids(channel)
    report = folder_sync(root=tmp_path)

    files = scenario.tree(tmp_path)
    messages = sorted(name for name in files if name.endswith(".md"))
    assert messages == [
        "review/0001-alice-schema-v0-2.md",
        "review/0002-bob-re-schema.md",
        "review/0003-carol-n-c-d.md",
        "review/0004-alice-task-created-t-1.md",
        "review/0005-alice-task-created-t-2.md",
        "review/0006-bob-lease-claimed-t-1.md",
        f"review/0007-carol-path-locked-{lock_id[:28]}.md",
    ]
    assert set(files) - set(messages) == {
        "review/_meta.json",
        "review/_fences.json",  # the claim's and the lock's fences (docs/folder.md)
        "review/_tasks.lock",
        "review/.path-locks.lock",
        "review/.cursors/bob.txt",
        "review/tasks/T-1.json",
        "review/tasks/T-2.json",
        "review/claims/T-1.bob.json",
        f"review/locks/{lock_id}.json",
    }
    assert files["review/_meta.json"] == meta_bytes(channel)
    assert files["review/.cursors/bob.txt"] == b"2"
    assert files["review/_tasks.lock"] == files["review/.path-locks.lock"] == b""
    for seq, name in enumerate(messages, start=1):
        row = Message.objects.get(channel=channel, seq=seq)
        assert files[name] == message_bytes(row, channel="review")
    task = json.loads(files["review/tasks/T-1.json"])
    claim = json.loads(files["review/claims/T-1.bob.json"])
    assert task["owner"] == claim["owner"] == "bob"
    assert task["lease_expires_at"] == claim["lease_expires_at"]
    assert json.loads(files["review/tasks/T-2.json"])["depends_on"] == ["T-1"]
    modes = {
        name: stat.S_IMODE(os.stat(tmp_path / name).st_mode) for name in files
    }  # the reference's: records 0600, messages and _meta 0644
    assert modes["review/0001-alice-schema-v0-2.md"] == 0o644
    assert modes["review/_meta.json"] == 0o644
    assert modes["review/tasks/T-1.json"] == 0o600
    assert modes["review/_tasks.lock"] == 0o600
    assert report.written == len(files)
    assert report.removed == 0
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(TEMP_SUFFIX)]


def test_same_database_gives_byte_identical_folders(tmp_path: Path) -> None:
    scenario.build()
    folder_sync(root=tmp_path / "a")
    folder_sync(root=tmp_path / "b")
    assert scenario.tree(tmp_path / "a") == scenario.tree(tmp_path / "b")
    assert scenario.tree(tmp_path / "a")


def test_a_second_sync_writes_nothing_and_ten_new_messages_write_ten_files(
    tmp_path: Path, replaced: list[str]
) -> None:
    channel = scenario.build()
    folder_sync(root=tmp_path)
    replaced.clear()
    again = folder_sync(root=tmp_path)
    assert (again.written, again.removed, replaced) == (0, 0, [])

    scenario.post(channel, 10)
    report = folder_sync(root=tmp_path)
    assert report.written == 10
    assert len(replaced) == 10
    assert all(Path(name).name.startswith(("0008-", "0009-", "001")) for name in replaced)
    [one] = report.channels
    assert (one.first_seq, one.last_seq, one.messages_written) == (8, 17, 10)
    # and the incremental folder equals a fresh one
    folder_sync(root=tmp_path / "fresh")
    fresh = scenario.tree(tmp_path / "fresh")
    assert {k: v for k, v in scenario.tree(tmp_path).items() if not k.startswith("fresh/")} == {
        k.removeprefix("fresh/"): v for k, v in fresh.items()
    }


def test_a_folder_someone_touched_is_put_back(tmp_path: Path) -> None:
    scenario.build()
    root = tmp_path / "root"
    folder_sync(root=root)
    expected = scenario.tree(root)
    chan = root / "review"
    # Edited in place, deleted, renamed, foreign files and folders, a crashed sync's temp, a
    # reference transaction marker, a post written by another tool.
    with open(chan / "0001-alice-schema-v0-2.md", "ab") as edited:
        edited.write(b"tampered\n")
    (chan / "0002-bob-re-schema.md").unlink()
    (chan / "0003-carol-n-c-d.md").rename(chan / "0003-carol-renamed.md")
    (chan / "0099-mallory-injected.md").write_text("---\nseq: 99\n---\nhi\n")
    (chan / "README.md").write_text("notes")
    (chan / "notes").mkdir()
    (chan / "notes" / "a.txt").write_text("a")
    (chan / f".0004-x.md.dead{TEMP_SUFFIX}").write_text("torn")
    (chan / "claims" / ".lease-transaction.json").write_text("{}")
    (chan / "tasks" / "T-9.json").write_text("{}")
    (chan / ".cursors" / "mallory.txt").write_text("5")
    (chan / "_meta.json").write_text("{}")

    report = folder_sync(root=root)
    assert scenario.tree(root) == expected
    assert not (chan / "notes").exists()
    [one] = report.channels
    # restored: 0001 (edited), 0002 (deleted), 0003 (renamed away), _meta.json
    assert one.written == 4
    # removed: 0003-carol-renamed, 0099, README.md, notes/a.txt, the temp, the marker, T-9,
    # mallory's cursor
    assert one.removed == 8
    assert folder_sync(root=root).written == 0


def test_a_deleted_trusted_file_is_written_again(tmp_path: Path) -> None:
    channel = scenario.build()
    scenario.post(channel, 5)
    folder_sync(root=tmp_path)
    victim = next((tmp_path / "review").glob("0010-*.md"))
    data = victim.read_bytes()
    victim.unlink()
    assert folder_sync(root=tmp_path).written == 1
    assert victim.read_bytes() == data


def test_verify_reads_every_file(tmp_path: Path) -> None:
    scenario.build()
    folder_sync(root=tmp_path)
    target = tmp_path / "review" / "0001-alice-schema-v0-2.md"
    # An edit that keeps the size and puts the old ctime back is beyond the incremental check
    # (no one can set a ctime back; we stand in for it by faking the mark instead).
    state = tmp_path / SYNC_DIR / "channels" / "review.json"
    original = target.read_bytes()
    target.write_bytes(original.replace(b"first", b"FIRST"))
    manifest = json.loads(state.read_bytes())
    manifest["watermark_ns"] = os.stat(target).st_ctime_ns + 1
    state.write_text(json.dumps(manifest))
    assert folder_sync(root=tmp_path).written == 0  # trusted, as designed
    assert folder_sync(root=tmp_path, verify=True).written == 1
    assert target.read_bytes() == original


def test_records_that_went_lose_their_files(tmp_path: Path) -> None:
    channel = scenario.build()
    [lock_id] = scenario.lock_ids(channel)
    folder_sync(root=tmp_path)
    chan = tmp_path / "review"
    assert (chan / "claims" / "T-1.bob.json").exists()
    lease_release(channel=channel, task_id="T-1", actor="bob")
    lock_release(channel=channel, owner="carol", lock_id=lock_id)
    report = folder_sync(root=tmp_path)
    assert not (chan / "claims").exists()
    assert not (chan / "locks").exists()
    [one] = report.channels
    assert one.claims == {"T-1"}
    assert one.locks == {lock_id}
    assert "lease.released" in "".join(p.name for p in chan.glob("*.md")).replace("-", ".")
    assert scenario.tree(tmp_path)["review/.cursors/bob.txt"] == b"2"


def test_state_md_is_the_latest_stored_summary(tmp_path: Path) -> None:
    channel = scenario.build()
    folder_sync(root=tmp_path)
    assert not (tmp_path / "review" / "state.md").exists()
    for text in ("# State: review\n\nold\n", "# State: review\n\nnew ✓\n"):
        StateSnapshot.objects.create(
            channel=channel,
            last_seq=channel.last_seq,
            markdown=text,
            summary={},
            compacted_at=timezone.now(),
            compacted_by="alice",
            audit_seq=channel.last_seq + 1,
        )
    folder_sync(root=tmp_path)
    assert (tmp_path / "review" / "state.md").read_text() == "# State: review\n\nnew ✓\n"


def test_lock_files_are_created_once_and_never_rewritten(tmp_path: Path) -> None:
    scenario.build()
    folder_sync(root=tmp_path)
    lock = tmp_path / "review" / "_tasks.lock"
    lock.write_bytes(b"someone's")
    assert folder_sync(root=tmp_path).written == 0
    assert lock.read_bytes() == b"someone's"
    lock.unlink()
    assert folder_sync(root=tmp_path).written == 1
    assert lock.read_bytes() == b""


def test_channels_that_are_gone_and_foreign_root_entries_are_removed(tmp_path: Path) -> None:
    scenario.agents("alice")
    channel_create(name="gone", created_by="alice")
    channel_create(name="kept", created_by="alice")
    folder_sync(root=tmp_path)
    (tmp_path / "stray.txt").write_text("x")
    (tmp_path / ".gitignore").write_text("x")
    Channel.objects.filter(name="gone").delete()
    report = folder_sync(root=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".agentchat-sync", ".gitignore", "kept"]
    assert {r.channel for r in report.channels if r.deleted} == {"gone", "stray.txt"}
    assert not (tmp_path / SYNC_DIR / "channels" / "gone.json").exists()


def test_one_channel_leaves_the_rest_of_the_root_alone(tmp_path: Path) -> None:
    scenario.build()
    channel_create(name="other", created_by="alice")
    folder_sync(root=tmp_path)
    (tmp_path / "stray.txt").write_text("x")
    (tmp_path / "other" / "note.txt").write_text("x")
    report = folder_sync(root=tmp_path, channel="review")
    assert [r.channel for r in report.channels] == ["review"]
    assert (tmp_path / "stray.txt").exists()
    assert (tmp_path / "other" / "note.txt").exists()
    with pytest.raises(AppError) as caught:
        folder_sync(root=tmp_path, channel="nope")
    assert caught.value.code == "CHANNEL_NOT_FOUND"


def test_a_foreign_root_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    scenario.build()
    (tmp_path / "precious.txt").write_text("keep me")
    with pytest.raises(AppError) as caught:
        folder_sync(root=tmp_path)
    assert caught.value.code == "SYNC_ROOT_FOREIGN"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.txt"]
    folder_sync(root=tmp_path, adopt=True)
    assert not (tmp_path / "precious.txt").exists()
    assert (tmp_path / "review" / "_meta.json").exists()

    file_root = tmp_path / "a-file"
    file_root.write_text("x")
    with pytest.raises(AppError) as caught:
        folder_sync(root=file_root)
    assert caught.value.code == "SYNC_ROOT_INVALID"


def test_symlinks_in_the_folder_are_never_followed(tmp_path: Path) -> None:
    scenario.build()
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.json").write_text("keep")
    folder_sync(root=root)
    chan = root / "review"
    for name in ("tasks", "claims"):
        import shutil

        shutil.rmtree(chan / name)
        (chan / name).symlink_to(outside)
    (chan / "0001-alice-schema-v0-2.md").unlink()
    (chan / "0001-alice-schema-v0-2.md").symlink_to(outside / "keep.json")
    folder_sync(root=root)
    assert sorted(p.name for p in outside.iterdir()) == ["keep.json"]
    assert (outside / "keep.json").read_text() == "keep"
    assert (chan / "tasks").is_dir() and not (chan / "tasks").is_symlink()
    assert not (chan / "0001-alice-schema-v0-2.md").is_symlink()
    folder_sync(root=tmp_path / "fresh")
    assert scenario.tree(root) == scenario.tree(tmp_path / "fresh")


def test_a_second_sync_of_the_same_root_is_refused_while_one_runs(tmp_path: Path) -> None:
    import fcntl

    scenario.build()
    folder_sync(root=tmp_path)
    fd = os.open(tmp_path / SYNC_DIR / "lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(AppError) as caught:
            folder_sync(root=tmp_path)
        assert caught.value.code == "SYNC_BUSY"
    finally:
        os.close(fd)
    assert folder_sync(root=tmp_path).written == 0


def test_claimed_markers_are_written_as_the_reference_names_them(tmp_path: Path) -> None:
    from channels_app.models import MarkerClaim
    from channels_app.services import marker_claim

    channel = scenario.build()
    marker_claim(channel=channel, marker="task-12.md", owner="Bob.Sub")
    marker_claim(channel=channel, marker="notes", owner="carol")  # not a reference marker
    MarkerClaim.objects.create(channel=channel, marker="task-doc.md", owner="dave", text="Do it.\n")
    report = folder_sync(root=tmp_path)
    chan = tmp_path / "review"
    assert sorted(p.name for p in chan.glob("task-*")) == [
        "task-12.CLAIMED-bob-sub.md",
        "task-doc.CLAIMED-dave.md",
    ]
    assert (chan / "task-12.CLAIMED-bob-sub.md").read_bytes() == b""
    assert (chan / "task-doc.CLAIMED-dave.md").read_bytes() == b"Do it.\n"
    assert stat.S_IMODE((chan / "task-doc.CLAIMED-dave.md").stat().st_mode) == 0o644
    [one] = report.channels
    assert one.markers == {"task-12.md", "task-doc.md"}
    assert "claimed markers task-12.md, task-doc.md" in one.describe()

    # Unchanged: nothing written. Touched by hand: put back. Gone from the database: removed.
    assert folder_sync(root=tmp_path).written == 0
    (chan / "task-doc.CLAIMED-dave.md").write_text("edited")
    (chan / "task-9.CLAIMED-eve.md").write_text("made by hand")
    MarkerClaim.objects.filter(marker="task-12.md").delete()
    report = folder_sync(root=tmp_path)
    assert sorted(p.name for p in chan.glob("task-*")) == ["task-doc.CLAIMED-dave.md"]
    assert (chan / "task-doc.CLAIMED-dave.md").read_bytes() == b"Do it.\n"
    [one] = report.channels
    assert one.markers == {"task-12.md", "task-9.md", "task-doc.md"}


def test_a_claimed_marker_name_that_is_a_directory_or_link_is_replaced(tmp_path: Path) -> None:
    from channels_app.services import marker_claim

    channel = scenario.build()
    marker_claim(channel=channel, marker="task-1.md", owner="bob")
    root = tmp_path / "root"
    folder_sync(root=root)
    chan = root / "review"
    target = tmp_path / "outside.txt"
    target.write_text("keep me")
    (chan / "task-1.CLAIMED-bob.md").unlink()
    (chan / "task-1.CLAIMED-bob.md").symlink_to(target)
    (chan / "task-2.CLAIMED-bob.md").mkdir()
    folder_sync(root=root)
    assert not (chan / "task-1.CLAIMED-bob.md").is_symlink()
    assert (chan / "task-1.CLAIMED-bob.md").read_bytes() == b""
    assert not (chan / "task-2.CLAIMED-bob.md").exists()
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("linked", [SYNC_DIR, f"{SYNC_DIR}/channels"])
def test_a_symlinked_state_folder_is_refused_and_nothing_outside_is_touched(
    tmp_path: Path, linked: str
) -> None:
    """The sync's own state (its lock, the channels' manifests, which it prunes) is a real
    folder of the root: a link planted there (a cloned audit repository can carry one) would
    have the prune delete, and the writes create, files wherever it points."""
    scenario.build()
    root = tmp_path / "root"
    folder_sync(root=root)
    outside = tmp_path / "outside"
    (outside / "channels").mkdir(parents=True)
    for name in ("keep.json", "lock", "review.json"):
        (outside / name).write_text("keep")
        (outside / "channels" / name).write_text("keep")
    before = scenario.tree(outside)
    import shutil

    shutil.rmtree(root / linked)
    (root / linked).symlink_to(outside if linked == SYNC_DIR else outside / "channels")
    with pytest.raises(AppError) as caught:
        folder_sync(root=root)
    assert caught.value.code == "SYNC_ROOT_INVALID"
    assert scenario.tree(outside) == before
    assert (outside / "channels" / "review.json").read_text() == "keep"


def test_nothing_is_made_through_a_symlinked_state_folder(tmp_path: Path) -> None:
    """The state folder is looked at before anything is made in it: a link to an empty
    folder elsewhere gets no ``channels/`` there (the refusal used to come after the mkdir)."""
    scenario.build()
    root = tmp_path / "root"
    folder_sync(root=root)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    import shutil

    shutil.rmtree(root / SYNC_DIR)
    (root / SYNC_DIR).symlink_to(outside)
    with pytest.raises(AppError) as caught:
        folder_sync(root=root)
    assert caught.value.code == "SYNC_ROOT_INVALID"
    assert list(outside.iterdir()) == []
