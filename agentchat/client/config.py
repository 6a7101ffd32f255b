"""Where the client finds its server and token.

Each setting is taken from the first place that has it: a command-line flag, then the
environment (``AGENT_CHAT_URL``, ``AGENT_CHAT_TOKEN``), then the config file, then the default
(``http://127.0.0.1:8000``; no token; a call's deadline of ``CALL_TIMEOUT`` seconds, also
``--call-timeout`` or ``AGENT_CHAT_CALL_TIMEOUT``). The config file is ``$AGENT_CHAT_CONFIG``
when set (it must then exist), else ``$XDG_CONFIG_HOME/agentchat/config.toml``
(``~/.config/agentchat/config.toml``) when it exists. It is TOML::

    url = "http://127.0.0.1:8000"     # the server's root
    token = "…"                       # from `manage.py create_agent_token NAME`
    channel = "review"                # the default channel of the hooks and the git guard
    agent_id = "alice.critic"         # the EP-0118 verbs' default agent (the token's or under it)
    call_timeout = 30                 # seconds a call may take in all (default 30)

Unknown keys are refused (a typo should not pass silently); a module that needs a key of its
own adds it to ``KNOWN_KEYS``.
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentchat.client.errors import ClientError
from agentchat.client.files import read_bounded

DEFAULT_URL = "http://127.0.0.1:8000"
ENV_URL = "AGENT_CHAT_URL"
ENV_TOKEN = "AGENT_CHAT_TOKEN"
ENV_CONFIG = "AGENT_CHAT_CONFIG"
ENV_CALL_TIMEOUT = "AGENT_CHAT_CALL_TIMEOUT"
CALL_TIMEOUT = 30.0  # seconds a whole call may take (a server is quick; a drip is not)
CALL_TIMEOUT_MAX = 3600.0
CONFIG_MAX_BYTES = 64 * 1024

# key -> the TOML type it must have; tables (dict) are for later sections (hooks, guard).
KNOWN_KEYS: dict[str, type | tuple[type, ...]] = {
    "url": str,
    "token": str,
    "channel": str,
    "agent_id": str,  # the EP-0118 verbs' and tools' default agent id (agentchat.client.iasp)
    "call_timeout": (int, float),
    "guard": dict,
}


@dataclass(frozen=True)
class Config:
    """The settings in effect and where each came from (``sources["url"]`` is ``"--url"``,
    ``"$AGENT_CHAT_URL"``, ``"url in <file>"`` or ``"default"``; the same for the token)."""

    url: str
    token: str | None
    path: Path | None = None  # the config file read, if any
    file: Mapping[str, Any] = field(default_factory=dict)  # its whole content
    sources: Mapping[str, str] = field(default_factory=dict)
    call_timeout: float = CALL_TIMEOUT


def connection_arguments(parser: argparse.ArgumentParser) -> None:
    """``--url`` and ``--token`` of a command that reads the config itself (mcp, guard,
    hooks): unset, they are absent from the namespace, so the environment and the config
    file decide, as ``config_load`` resolves them."""
    parser.add_argument(
        "--url",
        default=argparse.SUPPRESS,
        help="the server's root (default: $AGENT_CHAT_URL, config)",
    )
    parser.add_argument(
        "--token",
        default=argparse.SUPPRESS,
        help="the agent's token (default: $AGENT_CHAT_TOKEN, config)",
    )


def config_path(env: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """The config file's path and whether it was named explicitly (``$AGENT_CHAT_CONFIG``)."""
    env = os.environ if env is None else env
    if env.get(ENV_CONFIG):
        return Path(env[ENV_CONFIG]).expanduser(), True
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "agentchat" / "config.toml", False


def config_file_read(path: Path) -> dict[str, Any]:
    """The config file's table; ``CONFIG_INVALID`` naming the file when it cannot be read, is
    not TOML, is too big, or holds an unknown key or a value of the wrong type."""
    raw = read_bounded(
        path,
        CONFIG_MAX_BYTES,
        unreadable=("CONFIG_INVALID", f"cannot read config file {path}"),
        too_large=("CONFIG_INVALID", f"config file {path} is over {CONFIG_MAX_BYTES} bytes"),
    )
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ClientError("CONFIG_INVALID", f"config file {path} is not TOML: {exc}") from exc
    for key, value in data.items():
        if key not in KNOWN_KEYS:
            known = ", ".join(sorted(KNOWN_KEYS))
            raise ClientError(
                "CONFIG_INVALID", f"config file {path}: unknown key {key!r} (known: {known})"
            )
        wanted = KNOWN_KEYS[key]
        if not isinstance(value, wanted) or isinstance(value, bool):
            kinds = wanted if isinstance(wanted, tuple) else (wanted,)
            kind = " or ".join(one.__name__ for one in kinds)
            raise ClientError("CONFIG_INVALID", f"config file {path}: {key!r} must be a {kind}")
    return data


def url_check(url: str, *, where: str) -> str:
    """The server root URL without a trailing slash; ``CONFIG_INVALID`` unless it is
    ``http(s)://host[:port][/prefix]`` (no query, fragment or credentials)."""
    try:
        parts = urlsplit(url)
        port_ok = parts.port is None or 0 < parts.port < 65536
    except ValueError:
        parts, port_ok = None, False
    if (
        parts is None
        or not port_ok
        or parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.query
        or parts.fragment
        or parts.username is not None
        or any(ord(ch) <= 0x20 or ord(ch) == 0x7F for ch in url)
    ):
        raise ClientError(
            "CONFIG_INVALID",
            f"the server URL {url!r} ({where}) is not http(s)://host[:port], the server's root",
        )
    return url.rstrip("/")


def token_check(token: str, *, where: str) -> str:
    token = token.strip()
    printable = token.isascii() and all(ch.isprintable() and not ch.isspace() for ch in token)
    if not token or not printable:
        raise ClientError("CONFIG_INVALID", f"the token ({where}) is empty or not printable ASCII")
    return token


def call_timeout_check(value: object, *, where: str) -> float:
    """A call's deadline in seconds: a number in (0, ``CALL_TIMEOUT_MAX``], else
    ``CONFIG_INVALID``."""
    try:
        seconds = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        seconds = float("nan")
    if not 0 < seconds <= CALL_TIMEOUT_MAX:  # NaN fails too
        raise ClientError(
            "CONFIG_INVALID",
            f"the call timeout {str(value)[:50]!r} ({where}) is not a number of seconds in "
            f"(0, {CALL_TIMEOUT_MAX:g}]",
        )
    return seconds


def config_load(
    *,
    url: str | None = None,
    token: str | None = None,
    call_timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """The settings in effect for these flags (None: not given)."""
    env = os.environ if env is None else env
    path, explicit = config_path(env)
    data: dict[str, Any] = {}
    used: Path | None = None
    if explicit or path.is_file():
        data, used = config_file_read(path), path
    sources: dict[str, str] = {}

    def pick(name: str, flag: Any, env_name: str) -> tuple[Any, str]:
        if flag is not None:
            return flag, f"--{name.replace('_', '-')}"
        if env.get(env_name):
            return env[env_name], f"${env_name}"
        if name in data:
            return data[name], f"{name} in {used}"
        return None, "default"

    raw_url, where = pick("url", url, ENV_URL)
    sources["url"] = where
    final_url = DEFAULT_URL if raw_url is None else url_check(raw_url, where=where)
    raw_token, where = pick("token", token, ENV_TOKEN)
    sources["token"] = where
    final_token = None if raw_token is None else token_check(raw_token, where=where)
    raw_timeout, where = pick("call_timeout", call_timeout, ENV_CALL_TIMEOUT)
    final_timeout = (
        CALL_TIMEOUT if raw_timeout is None else call_timeout_check(raw_timeout, where=where)
    )
    return Config(
        url=final_url,
        token=final_token,
        path=used,
        file=data,
        sources=sources,
        call_timeout=final_timeout,
    )
