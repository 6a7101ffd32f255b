"""The heavy gate and pool as the tests of live reads watch them (counted, not timed):
``heavy_calls`` spies on which reads ran on the heavy pool, ``held`` keeps another heavy
request of a key running (its agent's turn at the gate taken) until released."""

from __future__ import annotations

import asyncio
from typing import Any

from agentchat.core.db.heavy import HeavyGate, heavy_gate
from agentchat.core.live import follows


def heavy_calls(monkeypatch: Any) -> list[str]:
    """The names of the reads that run on the heavy pool from now on, in order."""
    calls: list[str] = []
    real_heavy = follows.run_db_heavy

    async def heavy(func, inner, /, **kwargs):
        calls.append(inner.__name__)
        return await real_heavy(func, inner, **kwargs)

    monkeypatch.setattr(follows, "run_db_heavy", heavy)
    return calls


async def held(key: bytes) -> tuple[HeavyGate, asyncio.Event, asyncio.Future[None]]:
    """Another heavy request of ``key`` (a summary, say), running until the event is set: the
    gate, the event, and the request."""
    gate = heavy_gate()
    holding, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        holding.set()
        await release.wait()

    holder = asyncio.ensure_future(gate.run(key, hold))
    await asyncio.wait_for(holding.wait(), 10)
    return gate, release, holder
