"""The conflict lookup through the index of anchors (locks_app.conflicts): exact, and reading only
the candidates, on SQLite and PostgreSQL, with and without case folding."""

from __future__ import annotations

import uuid

import pytest
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentchat.core.rules.errors import AppError
from channels_app.models import Channel
from locks_app import selectors
from locks_app.conflicts import ConflictScan
from locks_app.globs import WorkBudget, paths_overlap
from locks_app.models import PathLock, PathLockEntry
from locks_app.paths import PathEntry, anchor_key, entry_index_keys, match_key, path_normalize

pytestmark = pytest.mark.django_db

SEGMENTS = ["a", "A", "ab", "b", "B", "x.py", "ß", "SS", "ss", "*", "**", "a*", "*b", "?", "[ab]"]
entry_paths = st.lists(st.sampled_from(SEGMENTS), min_size=0, max_size=3).map(
    lambda parts: "/".join(parts) or "."
)


@pytest.fixture
def channel(db):
    return Channel.objects.create(name="scan")


def hold(channel: Channel, paths: list[str]) -> dict[int, list[str]]:
    """Store one lock per path as imported data would be (overlaps allowed): lock pk -> paths."""
    now = timezone.now()
    held: dict[int, list[str]] = {}
    for path in paths:
        lock = PathLock.objects.create(
            lock_id=uuid.uuid4().hex,
            channel=channel,
            owner="alice",
            expires_at=now,
            locked_at=now,
            updated_at=now,
        )
        key, key_folded = entry_index_keys(channel.pk, path)
        PathLockEntry.objects.create(
            lock=lock,
            channel=channel,
            position=0,
            normalized_path=path,
            display_path=path,
            index_key=key,
            index_key_folded=key_folded,
        )
        held[lock.pk] = [path]
    return held


def scan(channel, wanted, *, folded=False, exclude=None, budget=None):
    entries = [PathEntry(path, path, "file") for path in wanted]
    return ConflictScan(
        channel=channel,
        entries=entries,
        case_insensitive=folded,
        budget=budget or WorkBudget(),
        exclude_lock_pk=exclude,
    )


def brute_force(held, wanted, *, folded):
    return {
        pk
        for pk, paths in held.items()
        if any(
            paths_overlap(
                match_key(w, case_insensitive=folded), match_key(p, case_insensitive=folded)
            )
            for w in wanted
            for p in paths
        )
    }


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    held=st.lists(entry_paths, min_size=0, max_size=8, unique=True),
    wanted=st.lists(entry_paths, min_size=1, max_size=3, unique=True),
    folded=st.booleans(),
)
def test_the_index_finds_exactly_the_overlapping_locks(channel, held, wanted, folded):
    PathLock.objects.filter(channel=channel).delete()
    stored = hold(channel, held)
    assert scan(channel, wanted, folded=folded).run() == brute_force(stored, wanted, folded=folded)


def test_legacy_records_written_before_folding_are_found_when_it_is_on(channel):
    held = hold(channel, ["Src/Main.PY", "DOCS", "straße/x"])
    by_path = {paths[0]: pk for pk, paths in held.items()}
    assert scan(channel, ["src"], folded=True).run() == {by_path["Src/Main.PY"]}
    assert scan(channel, ["docs/a.md"], folded=True).run() == {by_path["DOCS"]}
    assert scan(channel, ["STRASSE/*"], folded=True).run() == {by_path["straße/x"]}
    assert scan(channel, ["src"], folded=False).run() == set()


def test_a_lookup_reads_only_the_candidates_whatever_else_is_held(channel):
    hold(channel, [f"d{i % 10}/f{i}.py" for i in range(300)] + ["src/a/b.py", "src/b*/c.py"])
    probe = scan(channel, ["src/a"])
    rows = probe._candidates()
    assert sorted(row[2] for row in rows) == ["src/a/b.py", "src/b*/c.py"]
    assert probe.run() == {PathLock.objects.get(entries__normalized_path="src/a/b.py").pk}
    # A leading wildcard may overlap anything: every entry is a candidate.
    assert len(scan(channel, ["*.md"])._candidates()) == 302


def bulk_hold(channel: Channel, paths: list[str]) -> None:
    """Many held paths quickly: one lock, one bulk insert."""
    now = timezone.now()
    lock = PathLock.objects.create(
        lock_id=uuid.uuid4().hex,
        channel=channel,
        owner="bob",
        expires_at=now,
        locked_at=now,
        updated_at=now,
    )
    rows = []
    for i, path in enumerate(paths):
        key, key_folded = entry_index_keys(channel.pk, path)
        rows.append(
            PathLockEntry(
                lock=lock,
                channel=channel,
                position=i,
                normalized_path=path,
                display_path=path,
                index_key=key,
                index_key_folded=key_folded,
            )
        )
    PathLockEntry.objects.bulk_create(rows, batch_size=2000)


def test_the_query_count_and_rows_read_do_not_grow_with_the_held_paths(channel):
    # Once checked at one level only (50 held), which a scan of the channel would pass too.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    wanted = [f"new/m{j}.py" for j in range(64)] + ["d3/f3.py", "d7"]

    def measure() -> tuple[int, int]:
        probe = scan(channel, wanted)
        with CaptureQueriesContext(connection) as queries:
            probe.run()
        reads = [q for q in queries.captured_queries if "locks_app_pathlockentry" in q["sql"]]
        return len(reads), len(probe._candidates())

    bulk_hold(channel, [f"d{i % 100}/f{i}.py" for i in range(10)])
    few = measure()
    bulk_hold(channel, [f"d{i % 100}/f{i}.py" for i in range(10, 10_000)])
    many = measure()
    assert few[0] == many[0] == 1  # one UNION ALL of index probes
    # The candidates are d3/f3.py and the entries below d7: 1 and 1 with 10 held; 1 and 100
    # with 10,000 (d7 holds them). The channel's other 9,899 entries are never read.
    assert few[1] == 2 and many[1] == 1 + 100


def test_every_probe_is_an_index_search_even_without_statistics(channel):
    # The test databases run without ANALYZE (PostgreSQL's autovacuum is off here), the state
    # in which a join to a VALUES list or a long IN list was planned as a scan of the channel.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    bulk_hold(channel, [f"d{i % 100}/f{i}.py" for i in range(5000)])
    probe = scan(channel, [f"d{j}/new{j}.py" for j in range(64)] + ["d3", "d4/x"], exclude=1)
    with CaptureQueriesContext(connection) as queries:
        probe.run()
    [query] = [q for q in queries.captured_queries if "locks_app_pathlockentry" in q["sql"]]
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("EXPLAIN QUERY PLAN " + query["sql"])
            steps = [row[3] for row in cursor.fetchall() if "locks_app_pathlockentry" in row[3]]
            assert steps and all("USING INDEX path_lock_entry_key " in s for s in steps), steps
        else:
            cursor.execute("EXPLAIN " + query["sql"])
            plan = "\n".join(row[0] for row in cursor.fetchall())
            assert "Seq Scan" not in plan and "path_lock_entry_key" in plan, plan
            conditions = [line for line in plan.splitlines() if "Index Cond:" in line]
            assert conditions and all("index_key" in line for line in conditions), plan


def test_a_second_run_compares_only_entries_new_since_the_first(channel):
    hold(channel, ["a/*.py"])
    probe = scan(channel, ["a/x.py"])
    first = probe.run()
    spent = probe.budget.limit - probe.budget.left
    assert len(first) == 1
    assert probe.run() == first
    assert probe.budget.limit - probe.budget.left == spent  # nothing compared again
    added = hold(channel, ["a/?.py"])
    alone = WorkBudget()
    paths_overlap("a/x.py", "a/?.py", alone)
    assert probe.run() == first | set(added)
    assert probe.budget.limit - probe.budget.left == spent + alone.limit - alone.left
    PathLock.objects.filter(pk__in=first).delete()
    assert probe.run() == set(added)  # gone since: no longer reported


def test_recovery_excludes_the_lock_itself(channel):
    held = hold(channel, ["a", "a/b"])
    own = next(pk for pk, paths in held.items() if paths == ["a"])
    other = next(pk for pk, paths in held.items() if paths == ["a/b"])
    assert scan(channel, ["a"], exclude=own).run() == {other}


def test_the_budget_is_shared_by_the_request_and_the_held_candidates(channel):
    # Held patterns below a literal anchor (those anchored at the workspace have an allowance
    # of their own, and their number is capped).
    hold(channel, [f"somewhere/*x{i}" for i in range(200)])
    with pytest.raises(AppError) as exc:
        scan(channel, ["somewhere/deep/file.py"], budget=WorkBudget(500)).run()
    assert exc.value.code == "PATH_LOCK_PATTERN_TOO_COMPLEX"
    assert scan(channel, ["somewhere/deep/file.py"]).run() == set()


def test_unlock_by_path_uses_the_index_and_exact_keys(channel, settings):
    held = hold(channel, ["src/a.py", "src/a.py/*", "src"])
    lock = selectors.lock_find_by_path(channel=channel, path="./src//a.py")
    assert lock.pk == next(pk for pk, paths in held.items() if paths == ["src/a.py"])
    settings.AGENTCHAT_PATH_LOCKS_CASE_INSENSITIVE = True
    assert selectors.lock_find_by_path(channel=channel, path="SRC/A.py").pk == lock.pk
    with pytest.raises(AppError) as exc:
        selectors.lock_find_by_path(channel=channel, path="src/b.py")
    assert exc.value.code == "PATH_LOCK_NOT_FOUND"


def test_long_folded_anchors_are_cut_at_a_segment_and_still_found(channel):
    # U+0587 (2 bytes) folds to two letters (4 bytes): a path of 1,019 bytes folds to 2,035.
    segment = "\u0587" * 127
    path = "/".join([segment] * 4)
    entry = path_normalize(path)
    anchor, anchor_folded = anchor_key(path), anchor_key(match_key(path, case_insensitive=True))
    assert anchor == path
    assert len(anchor_folded.encode()) <= 1024
    assert match_key(path, case_insensitive=True).startswith(anchor_folded + "/")
    assert entry_index_keys(channel.pk, path) == (
        f"{channel.pk}:{anchor}",
        f"{channel.pk}:{anchor_folded}",
    )
    [pk] = hold(channel, [entry.normalized_path])
    assert scan(channel, [path], folded=True).run() == {pk}
    assert scan(channel, ["/".join([segment] * 2)], folded=True).run() == {pk}
    assert scan(channel, ["/".join([segment] * 3) + "/x"], folded=True).run() == set()
    assert scan(channel, [path + "/x"], folded=False).run() == {pk}


def test_held_root_patterns_are_compared_on_their_own_allowance(channel):
    hostile = "".join(f"*{c}" for c in "abcdefghijklmno")
    hold(channel, [f"{hostile}*x{i}q" for i in range(32)])
    wanted = [f"{'abcdefghijklmnopqrstuvwxyz' * 2}{j}/f.py" for j in range(64)]
    probe = scan(channel, wanted)
    assert probe.run() == set()
    # The requester paid for nothing of it (its own paths are compared in paths_normalize);
    # the allowance covered the comparisons, which did real work.
    assert probe.budget.left == probe.budget.limit
    assert 0 < probe.held_budget.limit - probe.held_budget.left <= probe.held_budget.limit
    # A requested pattern against them is still the requester's work.
    probe = scan(channel, ["abc*/f.py"])
    probe.run()
    assert probe.budget.left < probe.budget.limit


@pytest.mark.django_db(transaction=True)
def test_a_check_does_not_queue_behind_a_writer():
    # Issue 9 review: the probe ran in transaction.atomic(), which on SQLite is BEGIN
    # IMMEDIATE, the writer's lock: a read-only check waited for every write transaction.
    import threading

    from django.db import connection, connections, transaction

    channel = Channel.objects.create(name="busy")
    hold(channel, ["src/a.py"])
    holding, done = threading.Event(), threading.Event()
    failures: list[BaseException] = []

    def writer() -> None:
        try:
            with transaction.atomic():
                Channel.objects.filter(pk=channel.pk).update(topic="writing")
                holding.set()
                assert done.wait(30)
        except BaseException as exc:  # reported below
            failures.append(exc)
            holding.set()
        finally:
            connections.close_all()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        assert holding.wait(30)
        assert not failures
        timeout = None
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:  # fail fast instead of the 20 s busy wait
                timeout = cursor.execute("PRAGMA busy_timeout").fetchone()[0]
                cursor.execute("PRAGMA busy_timeout = 200")
        try:
            conflicts = selectors.lock_check(
                channel=channel, paths=selectors.lock_paths_parse(["src", "docs/x"])
            )["conflicts"]
        finally:
            if timeout is not None:
                with connection.cursor() as cursor:
                    cursor.execute(f"PRAGMA busy_timeout = {int(timeout)}")
        assert [c["paths"][0]["normalized_path"] for c in conflicts] == ["src/a.py"]
    finally:
        done.set()
        thread.join(30)
    assert not failures


def test_the_second_run_reads_only_the_entries_written_since(channel):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    held = hold(channel, [f"src/d{i}/f.py" for i in range(300)])
    probe = scan(channel, ["src"])
    assert probe.run() == set(held)
    with CaptureQueriesContext(connection) as queries:
        again = probe.run()
    assert again == set(held)
    [entries] = [q["sql"] for q in queries.captured_queries if "pathlockentry" in q["sql"]]
    assert "index_key" not in entries.split("WHERE")[1]  # a range of the pk, no probe
    seen = probe._seen
    assert probe._since(seen) == []
    other = Channel.objects.create(name="other")
    hold(other, ["src/x.py"])  # another channel's write is read, and dropped
    added = hold(channel, ["src/new.py", "docs/a.md"])
    assert [row[2] for row in probe._since(seen)] == ["src/new.py", "docs/a.md"]
    assert probe.run() == set(held) | {pk for pk, paths in added.items() if paths[0][0] == "s"}


def test_the_index_probes_of_a_request_are_bounded():
    # "." once, 40 ancestors-or-self and one range below, of each of 64 paths
    deep = ["/".join(f"p{j}s{k}" for k in range(40)) for j in range(64)]
    with pytest.raises(AppError) as exc:
        scan(Channel(pk=1, name="x"), deep)
    assert exc.value.code == "PATH_LOCK_PATTERN_TOO_COMPLEX"
    assert exc.value.detail == {"probes": 1 + 64 * 41, "limit": 2000}
    scan(Channel(pk=1, name="x"), deep[:40])  # 1 + 40 x 41 = 1,641
