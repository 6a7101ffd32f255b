"""Shared fixtures.

- ``make_agent(name)`` → (agent, raw token); ``api_for(name)`` → an API client with its token
  (``alice``, ``bob``, ``carol``: those of three agents), ``api_client`` → one without: their
  requests go through ``agentchat.asgi.application`` in process, the route production traffic
  takes (``tests/asgi_client.py``). ``client`` (Django's test client) is for the pages and the
  admin, and refuses ``/api/``. ``tests/errors.py``: the one way to assert an error answer.
- ``live_server_proc``: a real daphne process on the test database (session-wide). Tests that
  talk to it need ``transactional_db`` so their rows are committed and visible to it.
- ``require_service(kind)``: skip when PostgreSQL/Redis is absent, but fail when
  AGENTCHAT_REQUIRE_SERVICES=1 (CI), so a missing service can never pass silently.

``make test`` runs the suite in pytest-xdist workers: each has a test database and a Redis
database of its own (``pytest_configure``), and starts its own servers on free ports.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from asgiref.sync import sync_to_async
from django.db import connection
from django.test import Client
from rest_framework.test import APIClient

from agentchat import serve
from agentchat.core.db.transactions import inline_executor
from agentchat.core.identity.services import agent_get_or_create, token_create
from agentchat.core.models import Agent
from agentchat.datadir import data_dir_prepare
from tests.asgi_client import AsgiApiClient

ROOT = Path(__file__).resolve().parent.parent
REQUIRE_SERVICES = os.environ.get("AGENTCHAT_REQUIRE_SERVICES") == "1"


def pytest_configure(config: pytest.Config) -> None:
    # The test database and the servers' logs go in the data folder: as every process of the
    # project, the suite makes it at its start (the settings create nothing).
    data_dir_prepare()
    database_of_tests_name()
    redis_of_worker_use()


def database_of_tests_name() -> None:
    """The test database of this process, with its pid in the name so that runs at once (and
    pytest-xdist's workers, whose suffix pytest-django adds) never share one: on SQLite a file
    in the data folder (WAL, several connections, a server in another process), on PostgreSQL
    a database of its own on the server."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    if db["ENGINE"] == "django.db.backends.sqlite3":
        name = str(Path(settings.DATA_DIR) / f"test-{os.getpid()}.sqlite3")
    else:
        name = f"test_{db['NAME']}_{os.getpid()}"
    db["TEST"] = {**db.get("TEST", {}), "NAME": name}


def worker_index() -> int:
    """This process's number among pytest-xdist's workers (gw0, gw1, …), 0 without xdist."""
    return int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)


def redis_url_of_worker(url: str) -> str:
    """``url`` moved to a Redis database of this worker's own. Layer groups are named by
    primary keys, which every worker's test database repeats, and the layer's channel names
    carry the database number (agentchat.settings): on one database, workers would ring each
    other's waits and streams."""
    index = worker_index()
    if not index:
        return url
    parts = urlsplit(url)
    db = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(db + index) % 16}"))


def redis_of_worker_use() -> None:
    """With REDIS_URL, this worker's layer (and the servers it starts) on its own database."""
    url = os.environ.get("REDIS_URL")
    if not url or not worker_index():
        return
    from django.conf import settings

    from tests.signals import redis_channel_layers

    url = redis_url_of_worker(url)
    os.environ["REDIS_URL"] = url  # the environment of the server processes tests start
    settings.REDIS_URL = url
    settings.CHANNEL_LAYERS = redis_channel_layers(url)


def require_service(kind: str, reachable: bool, why: str) -> None:
    if reachable:
        return
    if REQUIRE_SERVICES:
        pytest.fail(f"{kind} is required here (AGENTCHAT_REQUIRE_SERVICES=1): {why}")
    pytest.skip(f"{kind} not available: {why}")


def redis_url_for_tests() -> str:
    return os.environ.get("REDIS_URL") or redis_url_of_worker("redis://127.0.0.1:6379/0")


def redis_reachable(url: str) -> bool:
    import redis

    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except Exception:
        return False


@pytest.fixture
def make_agent(db: Any) -> Callable[[str], tuple[Agent, str]]:
    def make(name: str) -> tuple[Agent, str]:
        agent = agent_get_or_create(name=name)
        return agent, token_create(agent=agent)

    return make


@pytest.fixture
def api_for(make_agent: Callable[[str], tuple[Agent, str]]) -> Callable[[str], APIClient]:
    def client(name: str) -> APIClient:
        _, token = make_agent(name)
        api = AsgiApiClient()
        api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return api

    return client


# The agents most tests talk as: each an API client with a token of its own.
@pytest.fixture
def alice(api_for: Callable[[str], APIClient]) -> APIClient:
    return api_for("alice")


@pytest.fixture
def bob(api_for: Callable[[str], APIClient]) -> APIClient:
    return api_for("bob")


@pytest.fixture
def carol(api_for: Callable[[str], APIClient]) -> APIClient:
    return api_for("carol")


@pytest.fixture
def api_client(db: Any) -> APIClient:
    """An API client without credentials, through the ASGI application."""
    return AsgiApiClient()


@pytest.fixture(autouse=True)
def _folds_forgotten() -> Iterator[None]:
    """Each test starts with no message fold kept in memory (agentchat.state.fold_cache): a
    test's database is rolled back, the process's memory is not."""
    from agentchat.state.fold_cache import FOLDS

    FOLDS.clear()
    yield
    FOLDS.clear()


class CallerThreadExecutor(Executor):
    """``run_db``'s executor for a page under Django's test client: the heavy pages
    (``agentchat.dashboard.budget``) are async views, which the test client's sync handler runs
    with ``async_to_sync`` while the test's thread waits; their database work is handed back to
    that thread (``sync_to_async``, thread-sensitive), on the test's connection and inside its
    transaction, as the pool's threads would not be."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        work = sync_to_async(fn, thread_sensitive=True)(*args, **kwargs)
        task = asyncio.get_running_loop().create_task(work)

        def done(finished: asyncio.Task[Any]) -> None:
            if finished.cancelled():
                future.cancel()
            elif finished.exception() is not None:
                future.set_exception(finished.exception())
            else:
                future.set_result(finished.result())

        task.add_done_callback(done)
        return future


class PagesClient(Client):
    """Django's test client for the pages: refuses /api/, and runs a heavy page's database work
    in the test's thread (``CallerThreadExecutor``)."""

    def request(self, **request: Any) -> Any:
        if request.get("PATH_INFO", "").startswith(("/api/", "/v1/")):
            raise AssertionError(
                "/api/ goes through the API lane in production, not Django's handler: "
                "use api_client or api_for"
            )
        token = inline_executor.set(CallerThreadExecutor())
        try:
            return super().request(**request)
        finally:
            inline_executor.reset(token)


@pytest.fixture
def client() -> Client:
    """Django's test client, for the pages and the admin (pytest-django's, minus /api/)."""
    return PagesClient()


class FakeClock:
    """A controllable ``agentchat.core.rules.clock.now``: starts at the real now, moves on
    ``advance``."""

    def __init__(self) -> None:
        from django.utils import timezone

        self.current = timezone.now()

    def __call__(self) -> Any:
        return self.current

    def advance(self, seconds: float) -> None:
        from datetime import timedelta

        self.current += timedelta(seconds=seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeClock:
    from agentchat.core.rules import clock as clock_module

    fake = FakeClock()
    monkeypatch.setattr(clock_module, "now", fake)
    return fake


def database_url() -> str:
    """The URL of the database the tests run on (the test database), for a server process."""
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


class ServerProcess(serve.ServerProcess):
    """A server process on the test database (``agentchat.serve.ServerProcess``: it returns
    once the server serves), its output in the data folder."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        from django.conf import settings

        # The same SECRET_KEY, so sessions signed here are valid there.
        full_env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "SECRET_KEY": settings.SECRET_KEY,
            **(env or {}),
        }
        super().__init__(env=full_env, log_dir=Path(settings.DATA_DIR))

    _since = 0

    def output(self) -> str:
        """What the server wrote since ``output_mark()`` (all of it, before a mark)."""
        with open(self.log_path, "rb") as log:
            log.seek(self._since)
            return log.read().decode(errors="replace")

    def output_mark(self) -> None:
        self._since = self.log_path.stat().st_size


@contextlib.contextmanager
def server_of_its_own(django_db_blocker: Any, env: dict[str, str]) -> Iterator[ServerProcess]:
    """A server process with settings of its own (``env``) on the test database, stopped after:
    the server of a module whose settings differ from the session's ``live`` one."""
    with django_db_blocker.unblock():
        process = ServerProcess(env=env)
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="session")
def live_server_proc(django_db_setup: Any, django_db_blocker: Any) -> Iterator[ServerProcess]:
    with django_db_blocker.unblock():
        server = ServerProcess()
    yield server
    server.stop()


@pytest.fixture
def live(live_server_proc: ServerProcess, transactional_db: Any) -> ServerProcess:
    # Its output() is this test's: a traceback another test provoked on purpose is not in it.
    live_server_proc.output_mark()
    return live_server_proc


async def in_thread(func: Callable[[], Any]) -> Any:
    """Run ``func`` in a worker thread (so the test's event loop keeps serving endpoints) and
    close that thread's database connections afterwards: a connection left checked out of
    PostgreSQL's pool keeps the test database from being dropped."""
    import asyncio

    from django.db import connections

    from agentchat.core.live.push import home_loop_set

    def run() -> Any:
        try:
            return func()
        finally:
            connections.close_all()

    home_loop_set()  # pushes made in the thread ring this loop's layer, as on the server
    return await asyncio.to_thread(run)


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


# Keep sys.path sane for `python -m pytest` from anywhere.
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


@pytest.fixture
def assert_max_queries() -> Callable[[int], Any]:
    """``django_assert_max_num_queries`` for a request that may be heavy: the work budget's
    own statements (PostgreSQL's ``SET statement_timeout`` and its reset, none on SQLite) are
    not the view's queries and are not counted."""
    import contextlib

    from django.test.utils import CaptureQueriesContext

    @contextlib.contextmanager
    def at_most(limit: int) -> Iterator[list[str]]:
        with CaptureQueriesContext(connection) as context:
            counted: list[str] = []
            yield counted
        counted.extend(
            query["sql"]
            for query in context.captured_queries
            if not query["sql"].startswith(("SET statement_timeout", "SET LOCAL statement_timeout"))
        )
        assert len(counted) <= limit, (
            f"{len(counted)} queries, at most {limit} expected:\n" + "\n".join(counted)
        )

    return at_most
