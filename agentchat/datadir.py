"""The deployment's data folder: the default SQLite database, collected static files and the
secret key that signs admin sessions.

``AGENTCHAT_DATA_DIR`` (default: ``var/`` in the project folder). Importing the settings creates
nothing; whatever starts a process of the deployment — ``manage.py`` (every command),
``python -m agentchat.serve`` and ``agentchat.asgi`` (for any other ASGI server) — calls
``data_dir_prepare()`` first, before the settings are read. This module imports no Django for
that reason.

Without ``SECRET_KEY`` in the environment, the key is generated once and kept in
``<data folder>/secret_key`` (mode 0600), so every process of the deployment and every restart
signs with the same key; a random key per process dropped every admin session at a restart
and made two processes refuse each other's sessions. Several machines need ``SECRET_KEY`` set
(or the same file).
"""

from __future__ import annotations

import contextlib
import os
import secrets
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY_FILE = "secret_key"


def data_dir() -> Path:
    raw = os.environ.get("AGENTCHAT_DATA_DIR", "").strip()
    return Path(raw).expanduser().absolute() if raw else BASE_DIR / "var"


def static_root(data: Path) -> Path:
    return data / "staticfiles"


def secret_key_read(data: Path) -> str | None:
    """The key kept in ``data``, or None when there is none yet.

    Raises RuntimeError when the file is there but holds no key: starting with another key
    would silently sign out everyone, so that is left to a person to decide.
    """
    path = data / SECRET_KEY_FILE
    try:
        key = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    if len(key) < 50:
        raise RuntimeError(
            f"{path} holds no usable secret key (under 50 characters): "
            "remove it to generate a new one (this signs everyone out), or set SECRET_KEY"
        )
    return key


def secret_key_ensure(data: Path) -> str:
    """The key kept in ``data``, made on first use.

    The key is written whole, mode 0600, under a name of its own and then hard-linked into
    place: a link never replaces an existing file, so when several processes start at once
    exactly one link succeeds and every process reads that one key.
    """
    key = secret_key_read(data)
    if key is not None:
        return key
    path = data / SECRET_KEY_FILE
    temporary = data / f".{SECRET_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(48) + "\n")  # 64 characters
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(FileExistsError):  # another process won: use its key
            os.link(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    key = secret_key_read(data)
    if key is None:
        raise RuntimeError(f"{path} disappeared while it was being created")
    return key


def data_dir_prepare() -> Path:
    """Create the data folder and its static root (whitenoise wants it to exist), and the
    secret key file unless ``SECRET_KEY`` is set. Returns the data folder."""
    data = data_dir()
    static_root(data).mkdir(parents=True, exist_ok=True)
    if not os.environ.get("SECRET_KEY"):
        secret_key_ensure(data)
    return data
