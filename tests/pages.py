"""Helpers for the paged lists' tests (agentchat.core.http.pages): walk a list page by page, count
the rows a page loads; count a block's work as SQLite's virtual machine steps (``vm_steps``)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from django.db import connection
from rest_framework.test import APIClient


@contextmanager
def vm_steps() -> Iterator[list[int]]:
    """SQLite's virtual machine steps (in thousands) of the block's statements (0 elsewhere)."""
    counted = [0]
    if connection.vendor != "sqlite":
        yield counted
        return
    connection.ensure_connection()

    def step() -> int:
        counted[0] += 1
        return 0

    connection.connection.set_progress_handler(step, 1000)
    try:
        yield counted
    finally:
        connection.connection.set_progress_handler(None, 0)


def page_get(client: APIClient, url: str, key: str, **params: Any) -> dict[str, Any]:
    query = f"?{httpx.QueryParams(params)}" if params else ""
    r = client.get(f"{url}{query}")
    assert r.status_code == 200, r.content
    body = r.json()
    assert set(body) == ({key, "more", "next"} if body["more"] else {key, "more"}), body
    return body


def walk(client: APIClient, url: str, key: str, id_key: str, **params: Any) -> list[list[Any]]:
    """Every page of a list, following ``next``: the pages' items' ``id_key``."""
    pages, after = [], None
    while True:
        extra = {**params, **({"after": after} if after is not None else {})}
        body = page_get(client, url, key, **extra)
        pages.append([item[id_key] for item in body[key]])
        if not body["more"]:
            return pages
        assert body["next"] == body[key][-1][id_key]
        after = body["next"]
        assert len(pages) < 10_000


def json_size(item: dict[str, Any]) -> int:
    return len(json.dumps(item, separators=(",", ":"), ensure_ascii=False).encode())


def count_loaded(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[int]:
    """Rows each page loads in ``module``'s lists (its ``list_page``'s ``load``; a module that
    calls it as ``pages.list_page`` has it spied on there, for the test)."""
    loaded: list[int] = []
    owner = module if hasattr(module, "list_page") else module.pages
    real = owner.list_page

    def spy(rows: Any, *, load: Callable[[Any], Any], **kwargs: Any) -> Any:
        def counting(queryset: Any) -> list[Any]:
            result = list(load(queryset))
            loaded.append(len(result))
            return result

        return real(rows, load=counting, **kwargs)

    monkeypatch.setattr(owner, "list_page", spy)
    return loaded
