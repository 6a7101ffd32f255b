from __future__ import annotations

import pytest

from tests.conftest import PagesClient


@pytest.fixture
def ops_channel(alice):
    """alice's open channel ``ops``, made through the API (the approvals tests' channel)."""
    assert alice.post("/api/v1/channels/", {"name": "ops"}, format="json").status_code == 201
    return alice


@pytest.fixture
def ann(django_user_model):
    """A person with an account (a module may name her otherwise with its own ``ann``)."""
    return django_user_model.objects.create_user("Ann Lee", password="s3cret-pw")


@pytest.fixture
def browser(ann) -> PagesClient:
    """``ann`` signed in, through a client that checks CSRF as a browser's form post is."""
    client = PagesClient(enforce_csrf_checks=True)
    client.force_login(ann)
    return client
