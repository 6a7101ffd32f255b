from __future__ import annotations

from typing import Any


def test_me_names_the_tokens_agent(api_for: Any) -> None:
    response = api_for("alice.critic").get("/api/v1/me/")
    assert response.status_code == 200
    assert response.json() == {"name": "alice.critic", "kind": "agent", "display_name": ""}


def test_me_needs_a_token(api_client: Any) -> None:
    response = api_client.get("/api/v1/me/")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "AUTH_REQUIRED"
