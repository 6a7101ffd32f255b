"""Reading a folder that someone else wrote: bounded, and never through a link.

Every directory and file is opened relative to its parent's descriptor with ``O_NOFOLLOW``,
so a symbolic link (or one swapped in between a listing and an open) is refused rather than
followed out of the root; a file must be a regular file and is read up to a size limit; a
listing stops at a count limit. Errors name the path relative to the root.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from agentchat.core.rules.errors import AppError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
# O_NONBLOCK: opening a FIFO planted in the folder must not hang the import.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


@dataclass(frozen=True)
class Entry:
    name: str
    kind: str  # "file", "dir", "link" or "other"


@dataclass(frozen=True)
class Dir:
    fd: int
    path: str  # relative to the root ("" for the root itself), for errors

    def child(self, name: str) -> str:
        return f"{self.path}/{name}" if self.path else name


# Identifies the content read at one time: a file rewritten since has another key.
StatKey = tuple[int, int, int]


def _link_error(where: str) -> AppError:
    return AppError(
        "IMPORT_PATH_OUTSIDE_ROOT",
        f"{where} is a symbolic link: links are not followed (they may lead out of the root)",
        detail={"file": where},
    )


def _unreadable(where: str, why: str) -> AppError:
    return AppError("IMPORT_UNREADABLE", f"{where}: {why}", detail={"file": where})


def _is_link(parent: Dir, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=parent.fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


@contextmanager
def root_open(root: Path) -> Iterator[Dir]:
    """The root folder (itself it may be reached through links: it is what the caller named).
    Raises IMPORT_ROOT_INVALID."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise AppError(
            "IMPORT_ROOT_INVALID",
            f"{root} is not a readable directory ({exc.strerror})",
            detail={"root": str(root)},
        ) from None
    try:
        yield Dir(fd, "")
    finally:
        os.close(fd)


@contextmanager
def dir_open(parent: Dir, name: str) -> Iterator[Dir | None]:
    """A sub-directory, or None when there is none of that name. Raises
    IMPORT_PATH_OUTSIDE_ROOT (a link), IMPORT_UNREADABLE (not a directory, unreadable)."""
    where = parent.child(name)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent.fd)
    except FileNotFoundError:
        yield None
        return
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(parent, name):
            raise _link_error(where) from None
        raise _unreadable(where, f"not a readable directory ({exc.strerror})") from None
    try:
        yield Dir(fd, where)
    finally:
        os.close(fd)


def entries(directory: Dir, *, limit: int) -> list[Entry]:
    """The directory's entries (not ``.``/``..``), sorted by name. Raises IMPORT_LIMIT_EXCEEDED
    (more than ``limit``), IMPORT_UNREADABLE."""
    found: list[Entry] = []
    try:
        with os.scandir(directory.fd) as scan:
            for item in scan:
                if len(found) >= limit:
                    raise AppError(
                        "IMPORT_LIMIT_EXCEEDED",
                        f"{directory.path or '.'}: more than {limit} entries",
                        detail={"file": directory.path or ".", "limit": limit},
                    )
                if item.is_symlink():
                    kind = "link"
                elif item.is_dir(follow_symlinks=False):
                    kind = "dir"
                elif item.is_file(follow_symlinks=False):
                    kind = "file"
                else:
                    kind = "other"
                found.append(Entry(item.name, kind))
    except OSError as exc:
        raise _unreadable(directory.path or ".", f"cannot list ({exc.strerror})") from None
    found.sort(key=lambda entry: entry.name)
    return found


def file_read(directory: Dir, name: str, *, limit: int) -> tuple[bytes, StatKey]:
    """A regular file's bytes (at most ``limit``) and its stat key. Raises
    IMPORT_PATH_OUTSIDE_ROOT (a link), IMPORT_UNREADABLE (missing, not a regular file),
    IMPORT_LIMIT_EXCEEDED (over ``limit`` bytes)."""
    where = directory.child(name)
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=directory.fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # the last component is a link
            raise _link_error(where) from None
        raise _unreadable(where, f"cannot open ({exc.strerror})") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _unreadable(where, "not a regular file")
        if info.st_size > limit:
            raise AppError(
                "IMPORT_LIMIT_EXCEEDED",
                f"{where}: {info.st_size} bytes, over the limit of {limit}",
                detail={"file": where, "limit": limit},
            )
        chunks: list[bytes] = []
        size = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
            if size > limit:  # it grew since the fstat
                raise AppError(
                    "IMPORT_LIMIT_EXCEEDED",
                    f"{where}: over the limit of {limit} bytes",
                    detail={"file": where, "limit": limit},
                )
        return b"".join(chunks), (info.st_ino, info.st_size, info.st_mtime_ns)
    except OSError as exc:
        raise _unreadable(where, f"cannot read ({exc.strerror})") from None
    finally:
        os.close(fd)


def link_to_dir(directory: Dir, name: str) -> bool:
    """Whether the link ``name`` leads to a directory (looked at, never opened)."""
    try:
        return stat.S_ISDIR(os.stat(name, dir_fd=directory.fd).st_mode)
    except OSError:
        return False


def stat_key(directory: Dir, name: str) -> StatKey | None:
    """The stat key ``file_read`` would give (None when missing or not a regular file: a link
    is not followed)."""
    try:
        info = os.stat(name, dir_fd=directory.fd, follow_symlinks=False)
    except OSError:
        return None
    if not stat.S_ISREG(info.st_mode):
        return None
    return (info.st_ino, info.st_size, info.st_mtime_ns)


def text_decode(raw: bytes, where: str) -> str:
    """UTF-8, strictly. Raises IMPORT_UNREADABLE."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _unreadable(where, "not UTF-8 text") from None
