"""The hot-path helpers read and write exactly what the ORM would, and hand work back safely."""

from __future__ import annotations

import asyncio
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

import pytest
from django.utils import timezone

from agentchat.core.db.rows import RowSelect, row_insert
from agentchat.core.db.transactions import call_on_loop, run_db
from agentchat.core.identity.services import token_authenticate, token_revoke
from agentchat.core.models import Agent, ApiToken, token_digest
from agentchat.core.rules.errors import AppError
from channels_app.api.serializers import MessagePostInput
from channels_app.models import Channel, Message
from channels_app.selectors import channel_get

TOKEN_WITH_AGENT = RowSelect(
    (ApiToken, "t"),
    (Agent, "a"),
    from_="{ApiToken} t JOIN {Agent} a ON a.id = t.agent_id",
    where="t.digest = %s",
)


def field_values(instance):
    return {f.attname: getattr(instance, f.attname) for f in type(instance)._meta.concrete_fields}


@pytest.mark.django_db
def test_row_select_builds_the_instances_the_orm_builds(make_agent):
    agent, raw = make_agent("alice")
    Agent.objects.filter(pk=agent.pk).update(last_seen=timezone.now(), display_name="Alice ✓")
    token, joined_agent = TOKEN_WITH_AGENT.first([token_digest(raw)])
    orm_token = ApiToken.objects.get(digest=token_digest(raw))
    assert field_values(token) == field_values(orm_token)
    assert field_values(joined_agent) == field_values(Agent.objects.get(pk=agent.pk))
    assert timezone.is_aware(joined_agent.last_seen)
    assert not token._state.adding and token._state.db == "default"
    assert TOKEN_WITH_AGENT.first(["no such digest"]) is None


@pytest.mark.django_db
def test_row_select_converts_json_and_big_integers(make_agent):
    Channel.objects.create(name="conv", members=["a", "b"], last_seq=2**40, topic="t")
    channel = channel_get("conv", viewer="a")
    assert channel.members == ["a", "b"]
    assert channel.last_seq == 2**40
    assert field_values(channel) == field_values(Channel.objects.get(name="conv"))
    with pytest.raises(AppError) as exc:
        channel_get("CONV", viewer="a")  # lookups are exact; creation refuses the case-folded twin
    assert exc.value.code == "CHANNEL_NOT_FOUND"


@pytest.mark.django_db
def test_row_insert_stores_what_save_would():
    channel = Channel.objects.create(name="ins")
    now = timezone.now()
    message = row_insert(
        Message(
            id=f"msg_{uuid.uuid4().hex}",
            channel=channel,
            seq=1,
            sender="alice",
            to=["bob"],
            recipients=",bob,",
            ts=now,
            title="t",
            data={"nested": [1, 2.5, None, "ü"]},
            metadata={"k": "v"},
            json_size=300,
        )
    )
    assert not message._state.adding
    stored = Message.objects.get(pk=message.pk)
    assert field_values(stored) == field_values(message)
    assert stored.data == {"nested": [1, 2.5, None, "ü"]}
    assert stored.ts == now
    assert stored.status == "discussion"  # the field default


@pytest.mark.django_db
def test_token_authenticate_still_refuses_revoked_and_unknown_tokens(make_agent):
    agent, raw = make_agent("alice")
    found, token = token_authenticate(raw)
    assert found == agent and found.name == "alice"
    token_revoke(token=token)
    for value in (raw, "ac_unknown"):
        with pytest.raises(AppError) as exc:
            token_authenticate(value)
        assert exc.value.code == "AUTH_INVALID"


@pytest.mark.django_db
def test_token_authenticate_touches_last_used_at_once_a_minute(make_agent):
    _, raw = make_agent("alice")
    _, token = token_authenticate(raw)
    first = ApiToken.objects.get(pk=token.pk).last_used_at
    assert first is not None
    token_authenticate(raw)
    assert ApiToken.objects.get(pk=token.pk).last_used_at == first
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first - timedelta(seconds=61))
    token_authenticate(raw)
    assert ApiToken.objects.get(pk=token.pk).last_used_at > first


def test_reused_validators_do_not_mix_concurrent_requests():
    # Each thread reuses one serializer per class; 8 threads validating different bodies at
    # once must each get back their own data and their own errors.
    def validate(i: int) -> object:
        body = {"title": f"title {i}", "to": [f"agent{i}"]} if i % 3 else {"title": i}
        try:
            return MessagePostInput.validate_input(body)
        except AppError as exc:
            return exc.code

    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(validate, range(3000)))
    for i, result in enumerate(results):
        if i % 3:
            assert result["title"] == f"title {i}" and result["to"] == [f"agent{i}"]
        else:
            assert result == "INVALID_TYPE"


@pytest.mark.asyncio
async def test_work_handed_back_runs_on_the_loop_after_the_call_even_when_it_raises():
    loop = asyncio.get_running_loop()
    ran: list[tuple[str, bool]] = []

    def work() -> None:
        assert call_on_loop(lambda: ran.append(("cb", asyncio.get_running_loop() is loop)))
        assert ran == []  # not before the call returns
        raise ValueError("after the commit")

    with pytest.raises(ValueError):
        await run_db(work)
    assert ran == [("cb", True)]
    assert call_on_loop(lambda: None) is False  # not a database-pool thread


@pytest.mark.asyncio
async def test_work_handed_back_after_the_caller_was_cancelled_still_runs():
    loop = asyncio.get_running_loop()
    started, go = threading.Event(), threading.Event()
    done = asyncio.Event()

    def work() -> None:
        started.set()
        go.wait(10)
        call_on_loop(lambda: loop.call_soon(done.set))

    task = asyncio.create_task(run_db(work))
    await asyncio.to_thread(started.wait, 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    go.set()
    await asyncio.wait_for(done.wait(), 10)
