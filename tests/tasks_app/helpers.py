"""Helpers for the tasks API tests, and a snapshot of everything the tasks app and the audit
trail hold, to assert that a failure changed nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from rest_framework.test import APIClient

from agentchat.core.rules.parsed import Parsed
from channels_app.models import Channel, Message
from tasks_app import selectors
from tasks_app.models import Lease, LeaseHistory, Task
from tests.errors import error_code

CHANNEL = "backend"


def lasting(seconds: float) -> Parsed[timedelta]:
    """A lease duration as a boundary hands it to the lease services (already parsed)."""
    return Parsed.ok(timedelta(seconds=seconds))


FIVE_MINUTES = lasting(300)  # the API's default lease


def tasks_url(task_id: str | None = None, action: str | None = None, channel: str = CHANNEL) -> str:
    url = f"/api/v1/channels/{channel}/tasks/"
    if task_id is not None:
        url += f"{task_id}/"
    if action is not None:
        url += f"{action}/"
    return url


def create(client: APIClient, task_id: str, channel: str = CHANNEL, **body: Any) -> Any:
    body.setdefault("title", f"Task {task_id}")
    return client.post(tasks_url(channel=channel), {"id": task_id, **body}, format="json")


def created(client: APIClient, task_id: str, **body: Any) -> dict[str, Any]:
    response = create(client, task_id, **body)
    assert response.status_code == 201, response.content
    return response.json()


def act(client: APIClient, task_id: str, action: str, body: Any = None) -> Any:
    return client.post(tasks_url(task_id, action), body or {}, format="json")


def acted(client: APIClient, task_id: str, action: str, body: Any = None) -> dict[str, Any]:
    response = act(client, task_id, action, body)
    assert response.status_code == 200, response.content
    return response.json()


def act_raw(client: APIClient, task_id: str, action: str, raw: str) -> Any:
    """POST a raw JSON text (NaN/Infinity literals are not produced by the test renderer)."""
    return client.generic("POST", tasks_url(task_id, action), raw, content_type="application/json")


def update(client: APIClient, task_id: str, **body: Any) -> Any:
    return client.patch(tasks_url(task_id), body, format="json")


def updated(client: APIClient, task_id: str, **body: Any) -> dict[str, Any]:
    response = update(client, task_id, **body)
    assert response.status_code == 200, response.content
    return response.json()


def show(client: APIClient, task_id: str) -> dict[str, Any]:
    response = client.get(tasks_url(task_id))
    assert response.status_code == 200, response.content
    return response.json()


def error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert an error response and return its body's ``error``."""
    assert response.status_code == status, response.content
    assert error_code(response) == code, response.content
    return response.json()["error"]


def audits(channel: str = CHANNEL) -> list[Message]:
    return list(
        Message.objects.filter(channel__name=channel, kind=Message.Kind.AUDIT).order_by("seq")
    )


def audit_payloads(channel: str = CHANNEL) -> list[dict[str, Any]]:
    return [json.loads(message.body) for message in audits(channel)]


def snapshot() -> dict[str, Any]:
    """Everything a task mutation may touch."""
    tasks = Task.objects.select_related("channel").order_by("channel_id", "task_id")
    return {
        "tasks": [
            (
                selectors.task_to_dict(selectors.task_get(channel=t.channel, task_id=t.task_id)),
                t.revision,
                t.updated_at,
                t.updated_at_spelling,
            )
            for t in tasks
        ],
        "leases": list(Lease.objects.order_by("pk").values()),
        "history": list(LeaseHistory.objects.order_by("pk").values()),
        "messages": list(Message.objects.order_by("pk").values_list("pk", flat=True)),
        "seqs": list(Channel.objects.order_by("pk").values_list("name", "last_seq")),
    }


@contextmanager
def unchanged() -> Iterator[None]:
    """Assert that the block changed no task, lease, history row or message."""
    before = snapshot()
    yield
    assert snapshot() == before
