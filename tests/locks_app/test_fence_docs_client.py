"""A client nobody here wrote: plain httpx against a live server, following only
docs/locks.md's "Fencing tokens" section (its curl lines), as a deploy script would."""

from __future__ import annotations

import httpx
import pytest

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_deploy_script_written_from_the_docs_refuses_a_lost_lock(live, make_agent):
    _, token = make_agent("bob")
    _, other = make_agent("carol")
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{live.url}/api/v1/channels/", headers=headers, timeout=60) as http:
        assert http.post("", json={"name": "backend"}).status_code == 201
        held = http.post("backend/locks/", json={"paths": ["deploy/"], "lease_seconds": 600})
        assert held.status_code == 201, held.text
        fence = held.json()["fence"]

        def state(fence: int) -> str:
            answer = http.get("backend/locks/fence/", params={"path": "deploy", "fence": fence})
            answer.raise_for_status()
            return answer.json()["state"]

        assert state(fence) == "current"
        assert state(fence - 1) == "stale"
        # Carol, a member too, may ask; the holder's unlock with an old fence is refused.
        carol = {"Authorization": f"Bearer {other}"}
        asked = httpx.get(
            f"{live.url}/api/v1/channels/backend/locks/fence/?path=deploy/&fence={fence}",
            headers=carol,
            timeout=60,
        )
        assert asked.json()["state"] == "current"
        refused = http.delete("backend/locks/", params={"path": "deploy", "fence": fence + 1})
        assert refused.status_code == 409
        assert refused.json()["error"]["code"] == "STALE_FENCE"
        assert http.delete("backend/locks/", params={"path": "deploy", "fence": fence}).is_success
        assert state(fence) == "expired"  # the lock ended: refuse the work
        bad = http.get("backend/locks/fence/", params={"path": "deploy", "fence": "7.0"})
        assert (bad.status_code, bad.json()["error"]["code"]) == (400, "INVALID_FENCE")
