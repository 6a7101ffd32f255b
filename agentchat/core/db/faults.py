"""What a request answers when the database fails under it (docs/deployment.md, "Faults").

A database that is down, restarting or out of disk is not a bug of the request: it gets a
stable code a client can act on instead of 500 ``INTERNAL_ERROR``, and nothing it was told
about is lost (every write is one transaction, and a write that was not answered may be
retried: posts with their ``id``, claims and lock acquisitions by their owner).

- 503 ``DATABASE_UNAVAILABLE`` with ``Retry-After``: PostgreSQL refused, dropped or could not
  give a connection (``OperationalError``/``InterfaceError``: connection lost, server shut
  down, the pool's wait ran out, ``DB_POOL_TIMEOUT``); SQLite busy past its timeout, or its
  file cannot be opened or written (an I/O error). The psycopg pool reconnects by itself once
  PostgreSQL is back: the next requests succeed, nothing to restart.
- 507 ``STORAGE_FULL``: the disk (or quota) of the database is full (SQLite's SQLITE_FULL,
  PostgreSQL's class 53100 ``disk_full``). The transaction was rolled back; reads still work.

``database_fault(exc)`` is None for every other error (a bug stays a 500, logged).
"""

from __future__ import annotations

import logging
import sqlite3

from django.db import DatabaseError, InterfaceError, OperationalError

from agentchat.core.rules.errors import AppError, internal_error

logger = logging.getLogger(__name__)

# Seconds a client is asked to wait before it retries (a restart takes a few).
RETRY_AFTER = 1

# SQLite's primary result codes that say the database is unavailable, not that the query is
# wrong ("no such table" is an OperationalError too: a bug, a 500).
_SQLITE_UNAVAILABLE = {
    sqlite3.SQLITE_BUSY,
    sqlite3.SQLITE_LOCKED,
    sqlite3.SQLITE_IOERR,
    sqlite3.SQLITE_CANTOPEN,
    sqlite3.SQLITE_PROTOCOL,
}
_PG_DISK_FULL = "53100"


def _causes(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen and len(seen) < 8:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def database_fault(exc: BaseException) -> AppError | None:
    """The stable answer for a database failure, or None when ``exc`` is something else."""
    chain = _causes(exc)
    # The driver's errors reach here wrapped by Django; psycopg_pool's PoolTimeout too (a
    # psycopg.OperationalError). A bare driver error is judged by its type below.
    if not any(isinstance(error, DatabaseError) or _driver_error(error) for error in chain):
        return None
    for error in chain:
        if isinstance(error, sqlite3.Error):
            code = getattr(error, "sqlite_errorcode", None)
            if code is not None and code & 0xFF == sqlite3.SQLITE_FULL:
                return storage_full()
            if code is not None and code & 0xFF in _SQLITE_UNAVAILABLE:
                return database_unavailable()
            return None
        if getattr(error, "sqlstate", None) == _PG_DISK_FULL:
            return storage_full()
    if any(_pg_unavailable(error) for error in chain):
        return database_unavailable()
    return None


def _driver_error(error: BaseException) -> bool:
    return isinstance(error, sqlite3.Error) or type(error).__module__.startswith("psycopg")


def _pg_unavailable(error: BaseException) -> bool:
    if isinstance(error, (OperationalError, InterfaceError)):
        return True
    module = type(error).__module__
    if not module.startswith("psycopg"):
        return False
    import psycopg

    return isinstance(error, (psycopg.OperationalError, psycopg.InterfaceError))


def database_unavailable() -> AppError:
    return AppError(
        "DATABASE_UNAVAILABLE",
        f"the database is unavailable (restarting or unreachable); retry in {RETRY_AFTER} s",
        detail={"retry_after": RETRY_AFTER},
    )


def storage_full() -> AppError:
    return AppError(
        "STORAGE_FULL",
        "the database's disk is full: nothing was written; reads still work",
    )


def fault_or_internal(exc: BaseException) -> AppError:
    """``database_fault(exc)``, logged as a warning (no traceback: it is not a bug), or else
    500 ``INTERNAL_ERROR`` (the caller logs the traceback)."""
    fault = database_fault(exc)
    if fault is None:
        return internal_error()
    logger.warning("%s: %s", fault.code, str(exc).strip()[:300] or type(exc).__name__)
    return fault
