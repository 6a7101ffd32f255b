"""The Redis channel layer the settings configure: deployments (and test runs) on different
database numbers of one Redis do not ring each other's groups, although pub/sub ignores them."""

from __future__ import annotations

import asyncio
import runpy
import uuid
from urllib.parse import urlsplit, urlunsplit

import pytest
from django.utils.module_loading import import_string

from tests.conftest import ROOT, redis_reachable, redis_url_for_tests, require_service


def with_db(url: str, db: int) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{db}"))


def layer_from_settings(monkeypatch: pytest.MonkeyPatch, url: str):
    monkeypatch.setenv("REDIS_URL", url)
    conf = runpy.run_path(str(ROOT / "agentchat" / "settings.py"))["CHANNEL_LAYERS"]["default"]
    return import_string(conf["BACKEND"])(**conf["CONFIG"])


@pytest.mark.asyncio
async def test_groups_on_two_database_numbers_of_one_redis_do_not_ring_each_other(monkeypatch):
    url = redis_url_for_tests()
    require_service("Redis", redis_reachable(url), f"no Redis at {url}")
    ours = layer_from_settings(monkeypatch, with_db(url, 14))
    theirs = layer_from_settings(monkeypatch, with_db(url, 15))
    group = f"probe.{uuid.uuid4().hex}"
    try:
        channel = await ours.new_channel()
        await ours.group_add(group, channel)
        await ours.group_send(group, {"type": "probe"})  # once it arrives, we are subscribed
        assert (await asyncio.wait_for(ours.receive(channel), 10))["type"] == "probe"
        # Redis handles the two publishes in this order, and delivers in that order: had the
        # other database's ring reached us, it would come before our sentinel.
        await theirs.group_send(group, {"type": "foreign"})
        await ours.group_send(group, {"type": "sentinel"})
        assert (await asyncio.wait_for(ours.receive(channel), 10))["type"] == "sentinel"
    finally:
        await ours.flush()
        await theirs.flush()
