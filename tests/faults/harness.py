"""Clients that retry, for the fault tests (tests/faults/): what a careful agent does.

``Retrying`` sends one logical request until it gets an answer that is not a fault: a
connection refused or reset (the server was killed), 503 ``DATABASE_UNAVAILABLE`` (the
database restarts) are retried, on the next live server; any other answer is returned. Every
answer is recorded, so that a test can assert that nothing answered 500 and that every 503
carried ``Retry-After``. The short pause between attempts is the client's back-off (as a real
client's, shorter than Retry-After to keep the test quick), not a synchronization.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import httpx

from tests.errors import code_or_none

BACKOFF = 0.05


class Retrying:
    def __init__(self, urls: Callable[[], list[str]], *, deadline: float, timeout: float = 15):
        self.urls = urls
        self.deadline = deadline
        self.timeout = timeout
        self.lock = threading.Lock()
        self.statuses: Counter[Any] = Counter()
        self.faults: list[str] = []  # answers that break the contract (500, a 503 without …)
        self._turn = itertools.count()

    def send(self, method: str, path: str, token: str, body: Any = None) -> httpx.Response:
        while True:
            if time.monotonic() > self.deadline:
                raise AssertionError(f"{method} {path}: no answer before the deadline")
            urls = self.urls()
            if not urls:
                time.sleep(BACKOFF)  # no server up right now (one is being restarted)
                continue
            url = urls[next(self._turn) % len(urls)]
            try:
                r = httpx.request(
                    method,
                    url + path,
                    json=body,
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=self.timeout,
                )
            except httpx.TimeoutException as exc:
                with self.lock:
                    self.faults.append(f"{method} {path}: no answer in {self.timeout} s ({exc!r})")
                raise
            except httpx.TransportError:
                with self.lock:
                    self.statuses["connection"] += 1
                time.sleep(BACKOFF)
                continue
            code = code_or_none(r)
            with self.lock:
                self.statuses[(r.status_code, code)] += 1
                if r.status_code >= 500 and code != "DATABASE_UNAVAILABLE":
                    self.faults.append(f"{method} {path}: {r.status_code} {r.text[:300]}")
                if code == "DATABASE_UNAVAILABLE" and not r.headers.get("Retry-After"):
                    self.faults.append(f"{method} {path}: 503 without Retry-After")
            if code == "DATABASE_UNAVAILABLE":
                time.sleep(BACKOFF)
                continue
            return r


class Clients:
    """Targets run in threads at once; ``join`` re-raises the first failure and fails when
    one is still running past its timeout (a hang)."""

    def __init__(self, targets: list[Callable[[], None]]) -> None:
        self.errors: list[BaseException] = []
        self.threads = [
            threading.Thread(target=self._guarded, args=(t,), daemon=True) for t in targets
        ]
        for t in self.threads:
            t.start()

    def _guarded(self, target: Callable[[], None]) -> None:
        try:
            target()
        except BaseException as exc:  # reported by join()
            self.errors.append(exc)

    def join(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        for t in self.threads:
            t.join(max(0.0, end - time.monotonic()))
        assert not any(t.is_alive() for t in self.threads), f"clients still busy after {timeout} s"
        if self.errors:
            raise self.errors[0]
