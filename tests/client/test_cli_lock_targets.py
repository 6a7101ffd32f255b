"""``agentchat unlock|recover CH TARGET`` find the lock TARGET names as the reference does: the
lock of that id when there is one, else the record holding that exact normalized path, looked
up by the server (``DELETE locks/?path=``, ``POST locks/recover/``), not among the first 50
conflicts of a check; the reason is judged before the target, as in the reference."""

from __future__ import annotations

import json
import unicodedata
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from channels_app.models import Channel
from locks_app.models import PathLock, PathLockEntry
from locks_app.paths import entry_index_keys
from tests.client.cli_run import Agentchat
from tests.signals import wait_until

OTHERS = 60  # more than a check lists (50)


@pytest.fixture
def cli(live, make_agent, tmp_path):
    def make(name: str) -> Agentchat:
        _, token = make_agent(name)
        return Agentchat(live.url, token, tmp_path)

    return make


@pytest.fixture
def alice(cli):
    run = cli("alice")
    assert run("init", "review").returncode == 0
    return run


def ok(result) -> str:
    assert result.returncode == 0, (result.stdout, result.stderr)
    return result.stdout


def fails(result, code: str, exit_code: int = 1) -> None:
    assert result.returncode == exit_code, (result.stdout, result.stderr)
    assert result.stderr.startswith(f"agentchat: {code}: "), result.stderr


def written_around_the_service(
    owner: str, paths: list[str], *, lock_id: str | None = None, expired: bool = False
) -> str:
    """A lock row as no request can make one (the services keep a channel's locks disjoint;
    switching AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE on over locks taken without it, or data
    written by hand, is how records come to overlap)."""
    channel = Channel.objects.get(name="review")
    now = datetime.now(UTC)
    expires = now - timedelta(hours=1) if expired else now + timedelta(hours=1)
    lock = PathLock.objects.create(
        lock_id=lock_id or uuid.uuid4().hex,
        channel=channel,
        owner=owner,
        expires_at=expires,
        locked_at=now - timedelta(hours=2),
        updated_at=now - timedelta(hours=2),
    )
    for position, path in enumerate(paths):
        key, folded = entry_index_keys(channel.pk, path)
        PathLockEntry.objects.create(
            lock=lock,
            channel=channel,
            position=position,
            normalized_path=path,
            display_path=path,
            kind="file",
            index_key=key,
            index_key_folded=folded,
        )
    return lock.lock_id


def crowd(path: str) -> None:
    """OTHERS locks of bob's, each overlapping ``path`` (below it), all sorting before any
    lock id the server makes, so that a check's first 50 conflicts leave ``path``'s own out."""
    for i in range(OTHERS):
        written_around_the_service("bob", [f"{path}/n{i}"], lock_id=f"0{i:031d}")


def listed(run: Agentchat, path: str) -> dict:
    return json.loads(ok(run("check", "review", path, "--json")))


def test_unlock_by_path_finds_the_callers_lock_beyond_the_first_50_conflicts(alice):
    lock_id = ok(alice("lock", "review", "docs/a.md")).split()[1]
    crowd("docs/a.md")
    check = listed(alice, "docs/a.md")
    assert (check["conflicts_total"], check["truncated"]) == (OTHERS + 1, True)
    assert lock_id not in {conflict["lock_id"] for conflict in check["conflicts"]}
    assert ok(alice("unlock", "review", "./docs//a.md")) == f"unlocked {lock_id} from review\n"
    assert not PathLock.objects.filter(lock_id=lock_id).exists()
    assert PathLock.objects.filter(owner="bob").count() == OTHERS
    fails(alice("unlock", "review", "docs/a.md"), "PATH_LOCK_NOT_FOUND")
    fails(alice("unlock", "review", "docs/a.md/n1"), "PATH_LOCK_OWNER_MISMATCH")


def test_recover_by_path_finds_the_lock_beyond_the_first_50_conflicts(alice, cli):
    carol = cli("carol")
    locked = json.loads(ok(alice("lock", "review", "docs/a.md", "--ttl", "1", "--json")))
    lock_id = locked["lock_id"]
    crowd("docs/a.md")
    expires = datetime.fromisoformat(locked["expires_at"])
    wait_until(lambda: datetime.now(UTC) > expires, timeout=10)
    # Found, and refused for what it is: it overlaps bob's active locks.
    fails(carol("recover", "review", "docs/a.md", "--reason", "stale"), "PATH_LOCK_CONFLICT")
    PathLock.objects.filter(owner="bob").delete()
    assert ok(carol("recover", "review", "docs/a.md", "--reason", "stale")) == (
        f"recovered {lock_id} for carol previous_owner=alice reason=stale\n"
    )
    fails(carol("recover", "review", "docs/b.md", "--reason", "stale"), "PATH_LOCK_NOT_FOUND")


def test_a_target_is_normalized_by_the_server_as_the_lock_was(alice, cli):
    carol = cli("carol")
    decomposed = unicodedata.normalize("NFD", "café/menu.md")
    lock_id = written_around_the_service("alice", ["café/menu.md"], expired=True)
    assert ok(carol("recover", "review", f"./{decomposed}", "--reason", "gone")).startswith(
        f"recovered {lock_id} for carol previous_owner=alice"
    )
    assert ok(carol("unlock", "review", decomposed)) == f"unlocked {lock_id} from review\n"


def test_a_lock_id_of_an_imported_folder_names_its_lock(alice, cli):
    # The reference's ids are any [A-Za-z0-9][A-Za-z0-9._-]*; a folder may carry such ones.
    lock_id = written_around_the_service("alice", ["lib"], lock_id="L1", expired=True)
    carol = cli("carol")
    assert ok(carol("recover", "review", "L1", "--reason", "gone")).startswith(
        "recovered L1 for carol previous_owner=alice"
    )
    fails(alice("unlock", "review", lock_id), "PATH_LOCK_OWNER_MISMATCH")
    assert ok(carol("unlock", "review", "L1")) == "unlocked L1 from review\n"
    # A path that could be an id is one when no lock has that id.
    written_around_the_service("alice", ["check"])
    written_around_the_service("alice", ["README.md"])
    assert ok(alice("unlock", "review", "check")).startswith("unlocked ")
    assert ok(alice("unlock", "review", "README.md")).startswith("unlocked ")


def test_the_reason_is_judged_before_the_target(alice):
    ok(alice("lock", "review", "src"))
    for target in ("nothing/here", "src", "../x", "f" * 32):
        fails(alice("recover", "review", target, "--reason", ""), "PATH_LOCK_INVALID_REASON")
    fails(alice("recover", "review", "nothing/here", "--reason", "x"), "PATH_LOCK_NOT_FOUND")
    fails(alice("recover", "review", "../x", "--reason", "x"), "PATH_LOCK_NOT_FOUND")
    fails(alice("recover", "review", "src", "--reason", "x", "--ttl", "nan"), "PATH_LOCK_NOT_STALE")
    fails(alice("unlock", "review", "../x"), "PATH_LOCK_NOT_FOUND")
