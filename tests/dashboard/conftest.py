from __future__ import annotations

import pytest


@pytest.fixture
def ops_channel(alice):
    """alice's open channel ``ops``, made through the API (the approvals tests' channel)."""
    assert alice.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    return alice
