"""Which database failures answer 503 ``DATABASE_UNAVAILABLE`` or 507 ``STORAGE_FULL``
(agentchat.core.db.faults), in process: the fault tests of tests/faults/ provoke the real
ones on real servers; here each kind of error, and the surfaces that answer it."""

from __future__ import annotations

import sqlite3

import django.db
import psycopg
import psycopg.errors
import psycopg_pool
import pytest

from agentchat.core.db.faults import database_fault
from agentchat.core.http.lane import ApiLane
from tests.errors import error_code


def _wrapped(driver_error: BaseException) -> django.db.Error:
    """The driver's error as Django raises it (``wrap_database_errors``)."""
    kind = next(
        getattr(django.db, c.__name__)
        for c in type(driver_error).__mro__
        if isinstance(getattr(django.db, c.__name__, None), type)
    )
    error = kind(*driver_error.args)
    error.__cause__ = driver_error
    return error


def _sqlite_full() -> sqlite3.Error:
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE t (x)")
    db.execute("PRAGMA max_page_count = 2")
    try:
        db.execute("INSERT INTO t VALUES (?)", ("x" * 100_000,))
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("a 2-page database took 100 kB")


def _sqlite_no_table() -> sqlite3.Error:
    try:
        sqlite3.connect(":memory:").execute("SELECT * FROM nowhere")
    except sqlite3.Error as exc:
        return exc
    raise AssertionError("unreachable")


UNAVAILABLE = "DATABASE_UNAVAILABLE"


@pytest.mark.parametrize(
    ("make", "code"),
    [
        (lambda: _wrapped(psycopg.OperationalError("server closed the connection")), UNAVAILABLE),
        (lambda: _wrapped(psycopg.InterfaceError("the connection is closed")), UNAVAILABLE),
        (lambda: _wrapped(psycopg_pool.PoolTimeout("no connection in 5 s")), UNAVAILABLE),
        (lambda: _wrapped(psycopg.errors.AdminShutdown("terminating connection")), UNAVAILABLE),
        (lambda: _wrapped(psycopg.errors.DiskFull("could not extend file")), "STORAGE_FULL"),
        (lambda: _wrapped(_sqlite_full()), "STORAGE_FULL"),
        (lambda: _wrapped(sqlite3.OperationalError("database is locked")), None),  # no code
        (lambda: _wrapped(_sqlite_no_table()), None),  # a bug: stays a 500
        (lambda: _wrapped(psycopg.errors.UndefinedTable("no such relation")), None),
        (lambda: ValueError("not the database"), None),
    ],
)
def test_database_fault_maps_only_unavailability_and_full_disks(make, code):
    fault = database_fault(make())
    assert (fault.code if fault else None) == code


def test_sqlite_busy_is_unavailable():
    first = sqlite3.connect(":memory:", timeout=0)
    path = "file:busy?mode=memory&cache=shared"
    a = sqlite3.connect(path, uri=True, timeout=0)
    b = sqlite3.connect(path, uri=True, timeout=0)
    a.execute("CREATE TABLE t (x)")
    a.execute("BEGIN IMMEDIATE")
    try:
        b.execute("BEGIN IMMEDIATE")
    except sqlite3.Error as exc:
        fault = database_fault(_wrapped(exc))
        assert fault is not None and fault.code == "DATABASE_UNAVAILABLE", exc
    else:
        raise AssertionError("two writers at once")
    finally:
        a.close(), b.close(), first.close()


@pytest.mark.parametrize(
    ("error", "status"),
    [(psycopg.OperationalError("connection refused"), 503), (psycopg.errors.DiskFull("full"), 507)],
)
def test_the_api_answers_a_database_fault_with_its_code(alice, monkeypatch, error, status):
    def failing(*args, **kwargs):
        raise _wrapped(error)

    monkeypatch.setattr(ApiLane, "_view", staticmethod(failing))
    r = alice.post("/api/v1/channels/", {"name": "x"}, format="json")
    assert r.status_code == status
    assert error_code(r) in ("DATABASE_UNAVAILABLE", "STORAGE_FULL")
    if status == 503:
        assert r.headers["Retry-After"] == "1"
