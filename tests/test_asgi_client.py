"""The API tests' client takes the production route: through ``agentchat.asgi.application``,
the API lane or the wait endpoint, with the views' database work in the test's transaction."""

from __future__ import annotations

import threading

import pytest
from django.core.signals import request_started
from rest_framework.test import APIClient

from channels_app import selectors
from channels_app.models import Channel

pytestmark = pytest.mark.django_db


def test_api_requests_go_through_the_lane_not_django_s_handler(alice, make_agent):
    started: list[object] = []

    def on_start(**kwargs: object) -> None:
        started.append(kwargs)

    request_started.connect(on_start)
    try:
        r = alice.get("/api/v1/channels/")
        assert r.status_code == 200
        assert started == []  # the lane sends no request signals
        # The lane declares the length and sets its own few headers; Django's security
        # middleware (which it skips) would have added a Cross-Origin-Opener-Policy.
        assert int(r["Content-Length"]) == len(r.content)
        assert r["X-Content-Type-Options"] == "nosniff"
        assert "Cross-Origin-Opener-Policy" not in r
        # DRF's own client takes Django's handler: the signal and the middleware.
        _, token = make_agent("bob")
        drf = APIClient()
        drf.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        r = drf.get("/api/v1/channels/")
        assert r.status_code == 200
        assert len(started) == 1
        assert r["Cross-Origin-Opener-Policy"] == "same-origin"
    finally:
        request_started.disconnect(on_start)


def test_the_view_runs_in_the_test_s_thread_and_transaction(alice, monkeypatch):
    seen: list[int] = []
    real = selectors.channel_list

    def spy(**kwargs: object) -> object:
        seen.append(threading.get_ident())
        return real(**kwargs)

    monkeypatch.setattr(selectors, "channel_list", spy)
    Channel.objects.create(name="uncommitted")  # visible only inside this test's transaction
    r = alice.get("/api/v1/channels/")
    assert [c["name"] for c in r.json()["channels"]] == ["uncommitted"]
    assert seen == [threading.get_ident()]


def test_the_wait_endpoint_goes_through_its_consumer(alice):
    assert alice.post("/api/v1/channels/", {"name": "w"}, format="json").status_code == 201
    r = alice.get("/api/v1/channels/w/wait/?timeout=0")
    assert r.status_code == 200
    assert r.json()["timed_out"] is True


def test_an_exception_in_a_view_is_raised_in_the_test_or_is_the_lane_s_500(
    alice, api_for, monkeypatch
):
    def broken(**kwargs: object) -> object:
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(selectors, "channel_list", broken)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        alice.get("/api/v1/channels/")
    quiet = api_for("carol")
    quiet.raise_request_exception = False
    r = quiet.get("/api/v1/channels/")
    assert r.status_code == 500
    assert r.json()["error"]["code"] == "INTERNAL_ERROR"


def test_each_client_keeps_to_its_route(client, api_client):
    with pytest.raises(AssertionError, match="use api_client or api_for"):
        client.get("/api/v1/channels/")
    with pytest.raises(AssertionError, match="use Django's test client"):
        api_client.get("/admin/")
    assert api_client.get("/api/v1/channels/").status_code == 401
