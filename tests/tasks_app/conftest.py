"""Fixtures for the tasks API tests: clients per agent and a channel."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from rest_framework.test import APIClient

from tests.tasks_app.helpers import CHANNEL


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
def backend(alice: APIClient) -> str:
    response = alice.post("/api/v1/channels/", {"name": CHANNEL}, format="json")
    assert response.status_code == 201, response.content
    return CHANNEL
