"""Fixtures for the tasks API tests: clients per agent and a channel."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from tests.tasks_app.helpers import CHANNEL


@pytest.fixture
def backend(alice: APIClient) -> str:
    response = alice.post("/api/v1/channels/", {"name": CHANNEL}, format="json")
    assert response.status_code == 201, response.content
    return CHANNEL
