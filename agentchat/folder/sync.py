"""The folder sync: the database mirrored as the reference CLI's folder (REFERENCE-CLI §3).

``folder_sync(root=...)`` makes ``root`` hold one folder per channel (or only the one named)
with ``_meta.json``, the message files, ``.cursors/<slug>.txt``, ``tasks/<id>.json``,
``claims/<task>.<owner>.json`` (every lease, expired ones too until recovered),
``locks/<lock_id>.json`` (every lock row), ``state.md`` (the latest stored summary, when there
is one), ``task-<id>.CLAIMED-<owner>.md`` (each claimed marker named ``task-<id>.md``) and the
empty ``_tasks.lock`` and ``.path-locks.lock`` (created once, never rewritten), with the bytes
of ``agentchat.folder.render``.

The sync owns the root: it is a mirror of the database. Whatever else is in a channel folder
(a post another tool wrote, a transaction marker, a README, a file edited by hand) is removed
or rewritten; folders of channels that are gone are removed. Hidden entries at the root itself
(``.git``, the sync's own ``.agentchat-sync/``) are left alone. A root that is neither empty
nor made by a sync is refused (SYNC_ROOT_FOREIGN) unless adopted.

Incremental: messages are immutable, so a message file once written stays right until someone
else touches it, and touching a file (editing, replacing, renaming, creating) sets its ctime,
which no one can set back. The sync keeps, per channel, the seq it has written through and
the highest ctime of the message files it wrote or checked (``.agentchat-sync/channels/
<name>.json``, outside the mirror). A later sync lists the channel folder (names and one
``lstat`` each, no reading) and trusts a message file whose seq is at most that seq and whose
ctime is older than that mark; every other message file is checked against the database (read
and compared, rewritten if different, removed if it is no message's file); then the new
messages are written; and if fewer trusted files are left than the database holds up to that
seq (someone deleted one), the missing ones are written again. The other files (records,
cursors, ``_meta.json``, ``state.md``) are few: each is rendered and compared with the file.
``verify=True`` trusts nothing (every file is read and compared): the answer to a clock that
went backwards or to an edit made while a sync ran.

Bounded memory: messages are streamed in chunks (``iterator(chunk_size=...)``) and the listing
of a folder is processed as it is read; what is kept grows only with the files that need a
check (a folder copied elsewhere, whose ctimes are all new: one int per message).
"""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentchat.core.rules.errors import AppError
from agentchat.folder.fences import FENCES_FILE, Fences, fences_bytes
from agentchat.folder.files import Files, is_temp_name
from agentchat.folder.render import (
    CLAIMS_DIR,
    CURSORS_DIR,
    LOCK_FILES,
    LOCKS_DIR,
    MARKER_CLAIMED_NAME,
    MESSAGE_NAME,
    META_FILE,
    PLAIN_MODE,
    RECORD_MODE,
    STATE_FILE,
    TASKS_DIR,
    cursor_files,
    lease_file,
    lock_file,
    marker_file,
    message_bytes,
    message_name,
    meta_bytes,
    state_bytes,
    task_file,
)
from agentchat.state.selectors import snapshot_markdown_latest
from channels_app.models import Channel
from channels_app.selectors import (
    channel_find,
    channel_list_all,
    cursor_iter_for_channel,
    marker_claim_iter_for_channel,
    message_count_upto,
    message_iter_after,
    message_list_among,
)
from locks_app.selectors import lock_fence_last, lock_iter_for_channel
from tasks_app.selectors import task_depends_on, task_lease, tasks_iter

SYNC_DIR = ".agentchat-sync"
# Bump when the bytes of a message file change (a render fix): every folder is then checked
# in full once, instead of trusting files an older version wrote.
MANIFEST_VERSION = 1
MANIFEST_MAX_BYTES = 64 * 1024  # a manifest is ~150 bytes
CHUNK = 2000
RECORD_CHUNK = 500
SEQ_MAX = 2**63 - 1
SUBDIRS = (CURSORS_DIR, TASKS_DIR, CLAIMS_DIR, LOCKS_DIR)
# The entries of a channel folder that are not messages.
_KNOWN = {META_FILE, STATE_FILE, FENCES_FILE, *LOCK_FILES, *SUBDIRS}


class Progress(Protocol):
    """What a progress bar is told: a channel's messages to stream, then each one done."""

    def start(self, channel: str, total: int) -> None: ...

    def advance(self, count: int) -> None: ...


def _range(seqs: list[int]) -> str:
    if not seqs:
        return ""
    low, high = min(seqs), max(seqs)
    return f"#{low}" if low == high else f"#{low}..#{high}"


@dataclass
class ChannelReport:
    """What one channel's sync changed (files written and removed, and which)."""

    channel: str
    written: int = 0
    removed: int = 0
    created: bool = False
    deleted: bool = False
    messages_written: int = 0
    messages_removed: int = 0
    first_seq: int | None = None
    last_seq: int | None = None
    tasks: set[str] = field(default_factory=set)
    claims: set[str] = field(default_factory=set)
    locks: set[str] = field(default_factory=set)
    cursors: set[str] = field(default_factory=set)
    markers: set[str] = field(default_factory=set)
    other: set[str] = field(default_factory=set)
    # The absolute paths written or removed (``Files.touched``): what --git-commit stages.
    paths: set[Path] = field(default_factory=set, repr=False, compare=False)

    @property
    def changed(self) -> bool:
        return bool(self.written or self.removed)

    def message_written(self, seq: int) -> None:
        self.messages_written += 1
        self.first_seq = seq if self.first_seq is None else min(seq, self.first_seq)
        self.last_seq = seq if self.last_seq is None else max(seq, self.last_seq)

    def summary(self) -> str:
        """One line: ``review: 12 written, 1 removed``."""
        if self.deleted:
            return f"{self.channel}: removed ({self.removed} files)"
        return f"{self.channel}: {self.written} written, {self.removed} removed"

    def describe(self) -> str:
        """What changed, for a commit message: ``review: messages #5..#14, tasks T-1, ...``."""
        if self.deleted:
            return f"{self.channel}: channel removed"
        parts = []
        if self.created:
            parts.append("new channel")
        if self.messages_written:
            seqs = [s for s in (self.first_seq, self.last_seq) if s is not None]
            parts.append(f"messages {_range(seqs)} ({self.messages_written})")
        if self.messages_removed:
            parts.append(f"{self.messages_removed} foreign message files removed")
        for label, names in (
            ("tasks", self.tasks),
            ("claims", self.claims),
            ("locks", self.locks),
            ("cursors", self.cursors),
            ("claimed markers", self.markers),
        ):
            if names:
                shown = sorted(names)
                more = f" (+{len(shown) - 10})" if len(shown) > 10 else ""
                parts.append(f"{label} {', '.join(shown[:10])}{more}")
        if self.other:
            parts.append(", ".join(sorted(self.other)))
        return f"{self.channel}: {'; '.join(parts) or 'files restored'}"


@dataclass
class SyncReport:
    channels: list[ChannelReport] = field(default_factory=list)

    @property
    def written(self) -> int:
        return sum(r.written for r in self.channels)

    @property
    def removed(self) -> int:
        return sum(r.removed for r in self.channels)

    @property
    def changed(self) -> list[ChannelReport]:
        return [r for r in self.channels if r.changed]

    @property
    def paths(self) -> set[Path]:
        """Every path this sync wrote or removed."""
        return {path for r in self.channels for path in r.paths}

    def summary(self) -> str:
        """The command's last line: totals, then each channel that changed."""
        changed = self.changed
        head = (
            f"synced {len(self.channels)} channel(s): {self.written} file(s) written, "
            f"{self.removed} removed"
        )
        return head + (" - " + "; ".join(r.summary() for r in changed) if changed else "")


# --- the root --------------------------------------------------------------------------------


def _root_prepare(root: Path, *, adopt: bool) -> Path:
    """The root as a directory the sync owns; its state folder. Raises SYNC_ROOT_INVALID,
    SYNC_ROOT_FOREIGN."""
    state = root / SYNC_DIR
    try:
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise AppError(
                "SYNC_ROOT_INVALID", f"{root} is not a directory", detail={"root": str(root)}
            )
        root.mkdir(parents=True, exist_ok=True)
        if not state.is_dir():
            foreign = sorted(e.name for e in os.scandir(root) if e.name != ".git")
            if foreign and not adopt:
                raise AppError(
                    "SYNC_ROOT_FOREIGN",
                    f"{root} is not empty and was not made by sync_folder (it holds "
                    f"{foreign[0]!r}{' and more' if len(foreign) > 1 else ''}); sync into a new "
                    "or empty folder, or pass --adopt to let the sync own it",
                    detail={"root": str(root), "entry": foreign[0]},
                )
            state.mkdir(exist_ok=True)
        # The state is written and pruned by name: a symlink there (a cloned audit
        # repository can carry one) would send the prune's removals and the manifests' writes
        # wherever it points. Both folders must be real ones of the root, each looked at
        # before anything is made inside it.
        _real_folder(state, root)
        (state / "channels").mkdir(exist_ok=True)
        _real_folder(state / "channels", root)
    except OSError as exc:
        raise AppError(
            "SYNC_ROOT_INVALID", f"{root}: {exc.strerror or exc}", detail={"root": str(root)}
        ) from exc
    return state


def _real_folder(folder: Path, root: Path) -> None:
    """Raises SYNC_ROOT_INVALID unless ``folder`` is a directory itself, not a symlink."""
    if not stat.S_ISDIR(os.lstat(folder).st_mode):
        raise AppError(
            "SYNC_ROOT_INVALID",
            f"{folder} is not a directory (a symlink is never followed)",
            detail={"root": str(root), "entry": str(folder)},
        )


@contextmanager
def _root_locked(state: Path) -> Iterator[None]:
    """One sync per root at a time. Raises SYNC_BUSY."""
    try:
        fd = os.open(state / "lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:  # a symlink (ELOOP) or another kind of entry
        raise AppError(
            "SYNC_ROOT_INVALID",
            f"{state / 'lock'}: {exc.strerror or exc}",
            detail={"root": str(state.parent)},
        ) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            raise AppError("SYNC_BUSY", f"another sync_folder is syncing {state.parent}") from exc
        yield
    finally:
        os.close(fd)


def _manifest_path(state: Path, name: str) -> Path:
    return state / "channels" / f"{name}.json"


def _manifest_read(path: Path) -> bytes:
    """A manifest's bytes: a regular file of at most MANIFEST_MAX_BYTES, never read through a
    symlink (ELOOP) nor from a device or a fifo. Raises OSError or ValueError (the manifest is
    then ignored and the channel synced whole)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MANIFEST_MAX_BYTES:
            raise ValueError(f"{path}: not a manifest")
        return os.read(fd, MANIFEST_MAX_BYTES + 1)[:MANIFEST_MAX_BYTES]
    finally:
        os.close(fd)


def _manifest_load(state: Path, channel: Channel) -> dict[str, Any] | None:
    """The channel's last sync, if it was of this very channel by this format."""
    try:
        manifest = json.loads(_manifest_read(_manifest_path(state, channel.name)))
    except (OSError, ValueError):
        return None
    if (
        not isinstance(manifest, dict)
        or manifest.get("version") != MANIFEST_VERSION
        or manifest.get("channel_id") != channel.pk
        or manifest.get("created") != channel.created_at.isoformat()
        or not isinstance(manifest.get("through_seq"), int)
        or manifest["through_seq"] > channel.last_seq
        or not isinstance(manifest.get("watermark_ns"), int)
    ):
        return None
    return manifest


def _manifest_save(state: Path, channel: Channel, *, through: int, watermark: int | None) -> None:
    if watermark is None:
        _manifest_path(state, channel.name).unlink(missing_ok=True)
        return
    manifest = {
        "version": MANIFEST_VERSION,
        "channel_id": channel.pk,
        "created": channel.created_at.isoformat(),
        "through_seq": through,
        "watermark_ns": watermark,
    }
    Files().write(_manifest_path(state, channel.name), json.dumps(manifest).encode(), 0o600)


# --- one channel -----------------------------------------------------------------------------


class _ChannelSync:
    def __init__(
        self, *, folder: Path, channel: Channel, verify: bool, progress: Progress | None
    ) -> None:
        self.folder = folder
        self.channel = channel
        self.name = channel.name
        # A direct channel's messages are HTTP v1 envelopes: rendered with their deliveries.
        self.direct = channel.direct_pair is not None
        self.verify = verify
        self.progress = progress
        self.files = Files()
        self.report = ChannelReport(channel.name)
        self.wanted: set[str] = set()  # the records' relative paths written this sync
        self.markers_found: set[str] = set()  # claimed-marker files the listing saw
        self.fences = Fences()  # the sidecar's (``agentchat.folder.fences``)

    def _count(self) -> None:
        self.report.written = self.files.written
        self.report.removed = self.files.removed
        self.report.paths = self.files.touched

    # -- messages

    def messages(self, manifest: dict[str, Any] | None) -> tuple[int, int | None]:
        """Make the message files right; returns (seq written through, new ctime mark)."""
        last = self.channel.last_seq
        through = manifest["through_seq"] if manifest else 0
        mark: int | None = manifest["watermark_ns"] if manifest else None
        new_mark = mark
        trusted = 0
        checked: set[int] = set()
        pending: list[tuple[int, str]] = []

        def note(ctime: int) -> None:
            nonlocal new_mark
            new_mark = ctime if new_mark is None else max(new_mark, ctime)

        def check(batch: list[tuple[int, str]]) -> None:
            rows = {
                row.seq: row
                for row in message_list_among(
                    channel=self.channel, seqs={seq for seq, _ in batch}, envelopes=self.direct
                )
            }
            for seq, name in batch:
                row = rows.get(seq)
                path = self.folder / name
                if row is None or message_name(row) != name:
                    self.files.remove(path)
                    self.report.messages_removed += 1
                    continue
                if self.files.write_if_changed(
                    path, message_bytes(row, channel=self.name), PLAIN_MODE
                ):
                    self.report.message_written(seq)
                note(os.lstat(path).st_ctime_ns)
                checked.add(seq)

        with os.scandir(self.folder) as entries:
            for entry in entries:
                name = entry.name
                if name in _KNOWN:
                    continue
                if MARKER_CLAIMED_NAME.fullmatch(name) and entry.is_file(follow_symlinks=False):
                    self.markers_found.add(name)  # the records' part (``_markers``)
                    continue
                match = MESSAGE_NAME.fullmatch(name)
                if is_temp_name(name) or match is None:
                    self.files.remove(self.folder / name)  # foreign, or a crashed sync's temp
                    self.report.other.add("foreign files removed")
                    continue
                try:
                    info = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue
                seq = int(match[1])
                if not stat.S_ISREG(info.st_mode) or seq > SEQ_MAX:
                    self.files.remove(self.folder / name)
                    self.report.messages_removed += 1
                    continue
                if mark is not None and seq <= through and info.st_ctime_ns < mark:
                    trusted += 1
                    continue
                pending.append((seq, name))
                if len(pending) >= CHUNK:
                    check(pending)
                    pending = []
        check(pending)

        # Some trusted file went (or was never written): write the missing ones again.
        present = trusted + sum(1 for seq in checked if seq <= through)
        if through and present != message_count_upto(channel=self.channel, upto=through):
            old = message_iter_after(
                channel=self.channel,
                after=0,
                upto=through,
                chunk_size=CHUNK,
                envelopes=self.direct,
            )
            for row in old:
                path = self.folder / message_name(row)
                if row.seq not in checked and not os.path.lexists(path):
                    note(self.files.write(path, message_bytes(row, channel=self.name), PLAIN_MODE))
                    self.report.message_written(row.seq)

        new = message_iter_after(
            channel=self.channel, after=through, upto=last, chunk_size=CHUNK, envelopes=self.direct
        )
        if self.progress is not None:
            self.progress.start(self.name, last - through)
        for row in new:
            if row.seq not in checked:
                path = self.folder / message_name(row)
                note(self.files.write(path, message_bytes(row, channel=self.name), PLAIN_MODE))
                self.report.message_written(row.seq)
            if self.progress is not None:
                self.progress.advance(1)
        return last, new_mark

    # -- records

    def _put(self, rel: str, data: bytes, mode: int, kind: set[str], key: str) -> None:
        self.wanted.add(rel)
        directory = rel.rpartition("/")[0]
        if directory:
            self.files.ensure_dir(self.folder / directory)
        if self.files.write_if_changed(self.folder / rel, data, mode):
            kind.add(key)

    def records(self) -> None:
        report = self.report
        self._put(META_FILE, meta_bytes(self.channel), PLAIN_MODE, report.other, META_FILE)
        for name in LOCK_FILES:
            if self.files.create_empty(self.folder / name, RECORD_MODE):
                report.other.add(name)
        self.files.ensure_dir(self.folder / CURSORS_DIR)
        cursors = cursor_iter_for_channel(channel=self.channel, chunk_size=CHUNK)
        for rel, data in cursor_files(cursors).items():
            self._put(rel, data, PLAIN_MODE, report.cursors, rel.rpartition("/")[2][:-4])
        self._tasks()
        self._locks()
        self.fences.lock_fence = lock_fence_last(channel=self.channel)
        sidecar = fences_bytes(self.fences)
        if sidecar is not None:
            self._put(FENCES_FILE, sidecar, RECORD_MODE, report.other, FENCES_FILE)
        elif self.files.remove(self.folder / FENCES_FILE):
            report.other.add(FENCES_FILE)
        self._markers()
        markdown = snapshot_markdown_latest(self.channel)
        if markdown is not None:
            self._put(STATE_FILE, state_bytes(markdown), RECORD_MODE, report.other, STATE_FILE)
        elif self.files.remove(self.folder / STATE_FILE):
            report.other.add(STATE_FILE)
        self._prune()

    def _tasks(self) -> None:
        # Loaded as every reader of tasks loads them (``tasks_app.selectors``), a chunk at a
        # time.
        for task in tasks_iter(channel=self.channel, chunk_size=RECORD_CHUNK):
            lease = task_lease(task)
            if task.fence:
                self.fences.tasks[task.task_id] = task.fence
            rel, data = task_file(
                task, channel=self.name, depends_on=task_depends_on(task), lease=lease
            )
            self._put(rel, data, RECORD_MODE, self.report.tasks, task.task_id)
            if lease is not None:
                rel, data = lease_file(lease, task_id=task.task_id, channel=self.name)
                self._put(rel, data, RECORD_MODE, self.report.claims, task.task_id)

    def _locks(self) -> None:
        for lock in lock_iter_for_channel(channel=self.channel, chunk_size=RECORD_CHUNK):
            rel, data = lock_file(lock)
            if lock.fence:
                self.fences.locks[lock.lock_id] = lock.fence
            self._put(rel, data, RECORD_MODE, self.report.locks, lock.lock_id)

    def _markers(self) -> None:
        for claim in marker_claim_iter_for_channel(channel=self.channel, chunk_size=RECORD_CHUNK):
            found = marker_file(claim)
            if found is not None:
                rel, data = found
                self._put(rel, data, PLAIN_MODE, self.report.markers, claim.marker)
        for name in sorted(self.markers_found - self.wanted):
            if self.files.remove(self.folder / name):
                self.report.markers.add(name.partition(".")[0] + ".md")

    def _prune(self) -> None:
        """Remove what the records no longer name (a released lease's claim, an unlocked
        lock, a temp file) and the record folders left empty (``.cursors`` stays, as the
        reference's ``init`` makes it)."""
        kinds = {
            TASKS_DIR: self.report.tasks,
            CLAIMS_DIR: self.report.claims,
            LOCKS_DIR: self.report.locks,
            CURSORS_DIR: self.report.cursors,
        }
        for directory in SUBDIRS:
            path = self.folder / directory
            if not path.is_dir() or path.is_symlink():
                self.files.remove(path)
                continue
            kept = 0
            with os.scandir(path) as entries:
                for entry in list(entries):
                    rel = f"{directory}/{entry.name}"
                    if rel in self.wanted:
                        kept += 1
                        continue
                    self.files.remove(path / entry.name)
                    key = entry.name.split(".")[0] if not is_temp_name(entry.name) else ""
                    if key:
                        kinds[directory].add(key)
            if not kept and directory != CURSORS_DIR:
                path.rmdir()

    def run(self, state: Path) -> ChannelReport:
        self.report.created = self.files.ensure_dir(self.folder)
        fresh = self.verify or self.report.created
        manifest = None if fresh else _manifest_load(state, self.channel)
        through, mark = self.messages(manifest)
        self.records()
        self.files.sync_dirs()
        _manifest_save(state, self.channel, through=through, watermark=mark)
        self._count()
        return self.report


# --- the whole root --------------------------------------------------------------------------


def folder_sync(
    *,
    root: Path,
    channel: str | None = None,
    verify: bool = False,
    adopt: bool = False,
    progress: Progress | None = None,
) -> SyncReport:
    """Mirror the database (or one channel of it) into ``root``; see the module doc.

    ``progress`` hears of each channel's new messages as they are written. Raises
    CHANNEL_NOT_FOUND, SYNC_ROOT_INVALID, SYNC_ROOT_FOREIGN, SYNC_BUSY.
    """
    root = Path(os.path.abspath(root))
    state = _root_prepare(root, adopt=adopt)
    report = SyncReport()
    with _root_locked(state):
        if channel is not None:
            found = channel_find(channel)
            if found is None:
                raise AppError(
                    "CHANNEL_NOT_FOUND", f"no channel named {channel!r}", detail={"name": channel}
                )
            channels: list[Channel] = [found]
        else:
            channels = channel_list_all()
        for one in channels:
            sync = _ChannelSync(
                folder=root / one.name, channel=one, verify=verify, progress=progress
            )
            report.channels.append(sync.run(state))
        if channel is None:
            report.channels += _prune_root(root, state, {one.name for one in channels})
    return report


def _prune_root(root: Path, state: Path, names: set[str]) -> list[ChannelReport]:
    """Remove the folders (and states) of channels that are gone, and foreign entries; hidden
    entries of the root (``.git``, ours) stay."""
    files = Files()
    reports = []
    with os.scandir(root) as entries:
        gone = sorted(e.name for e in entries if not e.name.startswith(".") and e.name not in names)
    for name in gone:
        removed = files.remove(root / name)
        reports.append(ChannelReport(name, removed=removed, deleted=True, paths={root / name}))
    with os.scandir(state / "channels") as entries:
        stale = [e.name for e in entries if e.name.removesuffix(".json") not in names]
    for name in stale:
        (state / "channels" / name).unlink(missing_ok=True)
    files.sync_dirs()
    return reports
