"""Database discipline: how the floor and the apps reach the database.

What belongs here: the write transaction of every service and its FIFO writer on SQLite, the
thread pools that run database work for async code (``transactions``), the heavy requests'
pool, gate and work budget (``heavy``), and the hot-path SQL that skips the queryset compiler
where a profile says so (``rows``).

May import: Django's database layer and ``rules``. Nothing above it: no models of the floor, no
identity, no request, no channel layer (a contract in pyproject.toml).
"""
