"""The sync's file operations inside a folder it owns: atomic writes, removals, and the
counting that the reports, the tests and the bench read.

A file is written to a hidden temporary sibling (``.<name>.<random>.sync-tmp``, which every
reader of the reference ignores), flushed and fsynced, then renamed over its name: a reader, or
a crash at any instant, sees the old bytes or the new ones, never a torn file. A crash may
leave a temporary sibling behind; the next sync removes it. The directories whose entries were
renamed are fsynced once at the end (``Files.sync_dirs``), so the renames are durable too.

Nothing here follows a symlink: an entry that should be a directory or a file and is a
symlink (or the wrong kind) is removed and made again, so a link planted in the folder can
never send a write or a removal outside it.
"""

from __future__ import annotations

import os
import secrets
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

TEMP_SUFFIX = ".sync-tmp"


def is_temp_name(name: str) -> bool:
    return name.startswith(".") and name.endswith(TEMP_SUFFIX)


def _lstat(path: Path) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None


@dataclass
class Files:
    """Writes and removals under one root, counted. ``written`` and ``removed`` count files
    (a removed directory counts the files it held, and one for itself when it held none).
    ``touched`` is every path written or removed (a removed directory as itself): what
    ``--git-commit`` stages, and nothing else."""

    written: int = 0
    removed: int = 0
    touched: set[Path] = field(default_factory=set)
    _dirs: set[Path] = field(default_factory=set)

    def write(self, path: Path, data: bytes, mode: int) -> int:
        """Replace ``path`` with ``data`` atomically (see the module doc); returns the new
        file's ctime in nanoseconds (the filesystem's clock, which the incremental check
        compares with)."""
        current = _lstat(path)
        if current is not None and not stat.S_ISREG(current.st_mode):
            self.remove(path)
        temp = path.parent / f".{path.name}.{secrets.token_hex(4)}{TEMP_SUFFIX}"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            try:
                os.fchmod(fd, mode)  # the umask must not decide the mode
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(temp, path)
        except BaseException:
            # An error here (not a crash) must not leave the temporary file; a crash may, and
            # the next sync removes it.
            temp.unlink(missing_ok=True)
            raise
        self._dirs.add(path.parent)
        self.touched.add(path)
        self.written += 1
        return os.lstat(path).st_ctime_ns

    def write_if_changed(self, path: Path, data: bytes, mode: int) -> bool:
        """Write ``path`` unless it already is a regular file holding exactly ``data``
        (a wrong mode alone is fixed in place). True when it was written."""
        current = _lstat(path)
        same_size = current is not None and current.st_size == len(data)
        if (
            current is not None
            and same_size
            and stat.S_ISREG(current.st_mode)
            and path.read_bytes() == data
        ):
            if stat.S_IMODE(current.st_mode) != mode:
                os.chmod(path, mode)
            return False
        self.write(path, data, mode)
        return True

    def create_empty(self, path: Path, mode: int) -> bool:
        """Create an empty file unless a regular file is there already (whatever it holds: the
        reference's lock files are created once and never rewritten). True when created."""
        current = _lstat(path)
        if current is not None:
            if stat.S_ISREG(current.st_mode):
                return False
            self.remove(path)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
        try:
            os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        self._dirs.add(path.parent)
        self.touched.add(path)
        self.written += 1
        return True

    def ensure_dir(self, path: Path) -> bool:
        """Make ``path`` a real directory (replacing a file or a symlink). True when made."""
        current = _lstat(path)
        if current is not None:
            if stat.S_ISDIR(current.st_mode):
                return False
            self.remove(path)
        path.mkdir(mode=0o755)
        self._dirs.add(path.parent)
        return True

    def remove(self, path: Path) -> int:
        """Remove a file, a symlink (never what it points to) or a whole directory; returns
        how many files went."""
        current = _lstat(path)
        if current is None:
            return 0
        if stat.S_ISDIR(current.st_mode):
            count = sum(len(files) for _, _, files in os.walk(path)) or 1
            shutil.rmtree(path)
        else:
            count = 1
            path.unlink()
        self._dirs.add(path.parent)
        self.touched.add(path)
        self.removed += count
        return count

    def sync_dirs(self) -> None:
        """fsync every directory whose entries changed, so the renames survive a power loss."""
        for directory in sorted(self._dirs):
            try:
                fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
            except FileNotFoundError:
                continue  # removed afterwards (a channel that went)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirs.clear()
