"""``agentchat guard``: a git pre-commit hook that honours other agents' path locks.

``guard install`` writes ``pre-commit`` into a repository's hooks folder (``core.hooksPath``
respected); it runs ``guard check``, which asks the server which locks of the configured
channel overlap the staged paths (added, changed, deleted, both sides of a rename) and refuses
the commit when one is held, unexpired, by another agent, naming the path, the holder and the
expiry. A staged name that cannot be checked (not UTF-8, or refused as a lock path) is
named on stderr and skipped; the others are still checked. ``--warn`` prints the same and lets
the commit through. When the check cannot be made (no server, a bad token, an unknown channel,
an answer that is not the server's, no answer within the call timeout for the whole check,
anything unexpected), the hook lets the commit through
with a message (fail open) unless installed with ``--fail-closed``. Paths in the repository
are taken as the lock paths (the workspace is the repository's top folder). Locks stay
advisory: ``git commit --no-verify`` skips the hook.

Settings: flags (written into the hook by ``install``) > the config file's ``[guard]`` table
(``channel``, ``mode = "refuse" | "warn"``, ``unreachable = "open" | "closed"``) > its
``channel`` key.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentchat.client import shapes
from agentchat.client.api import Client, seg
from agentchat.client.config import config_load, connection_arguments
from agentchat.client.errors import ClientError, one_line
from agentchat.client.safe import line

MARKER = "# agentchat-guard: installed by `agentchat guard install`"
CHECK_CHUNK = 64  # the server's limit of paths per check request
GLOB_CHARS = {"*": "[*]", "?": "[?]", "[": "[[]", "]": "[]]"}
EXIT_REFUSED = 1
PREFIX = "agentchat guard: "


class GuardError(Exception):
    """A usage or installation error of the guard itself (exit 2, or 1 for install)."""


@dataclass(frozen=True)
class Settings:
    channel: str
    warn: bool
    fail_closed: bool


def literal(path: str) -> str:
    """A file name as a lock path naming exactly it (glob characters bracketed)."""
    return "".join(GLOB_CHARS.get(ch, ch) for ch in path)


def git(repo: Path | None, *args: str) -> bytes:
    command = ["git", *(["-C", str(repo)] if repo else []), *args]
    done = subprocess.run(command, capture_output=True, check=False)
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit {done.returncode}"
        raise GuardError(f"git {' '.join(args)}: {one_line(message)}")
    return done.stdout


def staged_paths(repo: Path | None = None) -> list[str]:
    """Every path the staged commit adds, changes or deletes (renames as both names)."""
    raw = git(repo, "diff", "--cached", "--name-only", "--no-renames", "-z")
    names = [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]
    return sorted(set(names))


def _chunks(items: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def conflicts_of(client: Client, channel: str, paths: Sequence[str]) -> tuple[list[Any], list[str]]:
    """(the lock records overlapping ``paths``, one per lock; notes on paths the server
    could not check). A chunk the server refuses (a path it cannot hold, two paths that
    overlap) is checked a path at a time."""
    found: dict[str, Any] = {}
    notes: list[str] = []
    where = f"channels/{seg(channel)}/locks/check/"
    text: list[str] = []
    for path in paths:
        if _is_text(path):
            text.append(path)
        else:
            # A name git gave as bytes that are not UTF-8: no lock path can name it, and the
            # client refuses to send it (INVALID_TEXT), which must not abandon the others.
            notes.append(
                f"{shown(path)}: not checked (the file name is not UTF-8, so no lock can "
                "name it; a lock on a folder above it is not seen either)"
            )
    for chunk in _chunks(text, CHECK_CHUNK):
        try:
            answers = [
                client.request(
                    "POST", where, json={"paths": [literal(p) for p in chunk]}, expect=shapes.CHECK
                )
            ]
        except ClientError as exc:
            if not _per_path(exc):
                raise
            answers = []
            for path in chunk:
                try:
                    answers.append(
                        client.request(
                            "POST", where, json={"paths": [literal(path)]}, expect=shapes.CHECK
                        )
                    )
                except ClientError as one:
                    if not _per_path(one):
                        raise
                    notes.append(f"{shown(path)}: not checked ({one.code}: {one.message})")
        for answer in answers:
            for conflict in answer["conflicts"]:
                found[conflict["lock_id"]] = conflict
    return [found[key] for key in sorted(found)], notes


def _is_text(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _per_path(exc: ClientError) -> bool:
    """Whether a refused check request is about one of its paths (then each is checked
    alone and the one refused is reported), not about the check itself."""
    return exc.code.startswith("PATH_LOCK_") or exc.code == "INVALID_TEXT"


def shown(path: str) -> str:
    """A staged file name for a message: bytes that are not UTF-8 as ``\\xNN``, one line."""
    return one_line(path.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace"))


def covered(conflict: dict[str, Any]) -> str:
    """The paths a lock names, for a message."""
    held = ", ".join(entry.get("display_path") or "" for entry in conflict.get("paths", []))
    return one_line(held)[:300]


def say(text: str) -> None:
    """One line on stderr, terminal-safe: it quotes names, owners and paths from the server."""
    print(line(text), file=sys.stderr)


def check(
    settings: Settings,
    *,
    url: str | None = None,
    token: str | None = None,
    call_timeout: float | None = None,
) -> int:
    """Run the check on the current repository's staged paths; prints and returns the exit."""
    try:
        paths = staged_paths()
    except GuardError as exc:
        say(PREFIX + str(exc))
        return 2
    if not paths:
        return 0
    try:
        config = config_load(url=url, token=token, call_timeout=call_timeout)
        with Client.from_config(config) as client:
            # One deadline for the whole check, however many requests it takes: a commit
            # waits at most call_timeout seconds for the server.
            client.until = time.monotonic() + client.call_timeout
            me = client.request("GET", "me/", expect=shapes.ME)["name"]
            conflicts, notes = conflicts_of(client, settings.channel, paths)
    except Exception as exc:
        # A hook must never die with a traceback: anything unexpected (an odd answer the
        # client let through) is "cannot check", failing open or closed as configured.
        reason = (
            f"{exc.code}: {exc.message}"
            if isinstance(exc, ClientError)
            else f"unexpected {type(exc).__name__}: {exc}"
        )
        why = f"cannot check path locks in channel {settings.channel!r}: {reason}"
        if settings.fail_closed:
            say(PREFIX + one_line(why) + " — refusing the commit (fail-closed).")
            say(PREFIX + "commit with --no-verify to skip the check.")
            return EXIT_REFUSED
        say(PREFIX + one_line(why) + " — committing anyway (fail-open).")
        return 0
    for note in notes:
        say(PREFIX + "warning: " + one_line(note))
    held = [c for c in conflicts if c["owner"] != me and not c.get("expired")]
    stale = [c for c in conflicts if c["owner"] != me and c.get("expired")]
    for lock in stale:
        say(
            PREFIX + f"warning: {covered(lock)} was locked by {lock['owner']} "
            f"(expired {lock['expires_at']}, lock {lock['lock_id']}); recover it or ask them"
        )
    if not held:
        return 0
    verb = "warning" if settings.warn else "refusing the commit"
    say(
        PREFIX + f"{verb}: staged paths are locked by other agents in channel {settings.channel!r}:"
    )
    for lock in held:
        say(
            f"  {covered(lock)} locked by {lock['owner']} until {lock['expires_at']} "
            f"(lock {lock['lock_id']})"
        )
    if settings.warn:
        return 0
    say(
        PREFIX + "locks are advisory: ask the holder, wait for the lock to go, or commit with "
        "--no-verify to skip this check."
    )
    return EXIT_REFUSED


def settings_resolve(
    *, channel: str | None, warn: bool | None, fail_closed: bool | None, file: dict[str, Any]
) -> Settings:
    guard = file.get("guard")
    table: dict[str, Any] = guard if isinstance(guard, dict) else {}
    picked = channel or table.get("channel") or file.get("channel")
    if not isinstance(picked, str) or not picked:
        raise GuardError(
            "no channel: pass --channel, or set `channel` (or `[guard] channel`) in the config file"
        )
    mode = table.get("mode", "refuse")
    unreachable = table.get("unreachable", "open")
    if mode not in ("refuse", "warn") or unreachable not in ("open", "closed"):
        raise GuardError(
            'config [guard]: mode must be "refuse" or "warn", unreachable "open" or "closed"'
        )
    return Settings(
        channel=picked,
        warn=mode == "warn" if warn is None else warn,
        fail_closed=unreachable == "closed" if fail_closed is None else fail_closed,
    )


def hooks_dir(repo: Path) -> Path:
    """The repository's hooks folder (``core.hooksPath`` when set), made if missing.

    Asked as an absolute path: git prints ``--git-path`` relative to the current folder, so
    joining it to the top folder went wrong from a subfolder (git >= 2.31)."""
    raw = git(repo, "rev-parse", "--path-format=absolute", "--git-path", "hooks")
    path = Path(os.fsdecode(raw.rstrip(b"\n")))
    if not path.is_absolute():
        raise GuardError(f"git gave a relative hooks folder {str(path)!r} (git >= 2.31 needed)")
    path.mkdir(parents=True, exist_ok=True)
    return path


def hook_script(settings: Settings, python: str) -> str:
    args = ["-m", "agentchat.client.guard", "check", "--channel", settings.channel]
    args += ["--warn"] if settings.warn else ["--refuse"]
    args += ["--fail-closed"] if settings.fail_closed else ["--fail-open"]
    command = " ".join(shlex.quote(part) for part in [python, *args])
    return (
        f"#!/bin/sh\n{MARKER}\n"
        "# Path locks are advisory: `git commit --no-verify` skips this.\n"
        f'exec {command} "$@"\n'
    )


def install(repo: Path, settings: Settings, *, python: str | None = None) -> Path:
    """Write the pre-commit hook; refuses to replace a hook it did not write."""
    target = hooks_dir(repo) / "pre-commit"
    if target.exists() or target.is_symlink():
        try:
            current = target.read_text(encoding="utf-8", errors="replace")
        except OSError:
            current = ""
        if MARKER not in current:
            raise GuardError(
                f"{target} exists and is not the guard's: add the line "
                f"`{python or sys.executable} -m agentchat.client.guard check --channel "
                f"{settings.channel}` to it yourself, or move it away and install again"
            )
    temp = target.with_name("pre-commit.agentchat-tmp")
    temp.write_text(hook_script(settings, python or sys.executable), encoding="utf-8")
    temp.chmod(0o755)
    os.replace(temp, target)
    return target


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="guard_command", required=True)
    for name, helptext in (
        ("install", "write the pre-commit hook into a repository"),
        ("check", "check the staged paths (what the hook runs)"),
    ):
        one = sub.add_parser(name, help=helptext)
        one.add_argument("--channel", help="the channel whose locks count (default: config)")
        mode = one.add_mutually_exclusive_group()
        mode.add_argument("--warn", dest="warn", action="store_true", default=None)
        mode.add_argument("--refuse", dest="warn", action="store_false", default=None)
        down = one.add_mutually_exclusive_group()
        down.add_argument("--fail-closed", dest="fail_closed", action="store_true", default=None)
        down.add_argument("--fail-open", dest="fail_closed", action="store_false", default=None)
        connection_arguments(one)
        if name == "install":
            one.add_argument("--repo", default=".", help="the repository (default: here)")


def run_parsed(options: argparse.Namespace) -> int:
    try:
        config = config_load(
            url=getattr(options, "url", None), token=getattr(options, "token", None)
        )
        settings = settings_resolve(
            channel=options.channel,
            warn=options.warn,
            fail_closed=options.fail_closed,
            file=dict(config.file),
        )
    except ClientError as exc:
        print(exc.line(), file=sys.stderr)
        return exc.exit_code if options.guard_command == "install" else 0
    except GuardError as exc:
        say(PREFIX + str(exc))
        return 2
    if options.guard_command == "check":
        return check(
            settings,
            url=getattr(options, "url", None),
            token=getattr(options, "token", None),
            call_timeout=getattr(options, "call_timeout", None),  # `agentchat --call-timeout`
        )
    try:
        target = install(Path(options.repo), settings)
    except (GuardError, OSError) as exc:
        say(PREFIX + str(exc))
        return 1
    mode = "warn only" if settings.warn else "refuses"
    down = "fail-closed" if settings.fail_closed else "fail-open"
    print(line(f"installed {target} (channel {settings.channel}, {mode}, {down} when unreachable)"))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="agentchat guard", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run_parsed(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
