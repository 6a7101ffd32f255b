"""An import beside a running server (a real daphne process on the test database) that is
posting into another channel: the server's posts keep succeeding while the import runs, and
nothing of either is lost or torn."""

from __future__ import annotations

import threading
import time

import httpx

from channels_app.models import Message
from tests.conftest import auth
from tests.folder.sample import write_reference_channel
from tests.folder.test_import import import_folder

IMPORTED = 3000


def test_a_server_posting_meanwhile_is_not_starved_by_an_import(live, make_agent, tmp_path):
    token = make_agent("poster")[1]
    r = httpx.post(f"{live.url}/api/v1/channels/", json={"name": "busy"}, headers=auth(token))
    assert r.status_code == 201, r.text
    write_reference_channel(tmp_path, "bulk", IMPORTED)
    results: list[tuple[float, float, int]] = []
    stop = threading.Event()
    posting = threading.Event()

    def poster() -> None:
        with httpx.Client(base_url=live.url, headers=auth(token), timeout=60) as http:
            while not stop.is_set():
                started = time.monotonic()
                r = http.post(
                    "/api/v1/channels/busy/messages/",
                    json={"from": "poster", "title": "tick", "body": "during the import"},
                )
                results.append((started, time.monotonic(), r.status_code))
                posting.set()

    thread = threading.Thread(target=poster)
    thread.start()
    try:
        assert posting.wait(30)
        began = time.monotonic()
        import_folder(tmp_path)
        ended = time.monotonic()
    finally:
        stop.set()
        thread.join(60)
    assert [code for *_, code in results if code != 201] == []
    # Posts were answered while the import ran, not only after it.
    answered_during = [done for _, done, _ in results if began < done < ended]
    assert answered_during, (ended - began, len(results))
    seqs = list(Message.objects.filter(channel__name="busy").values_list("seq", flat=True))
    assert seqs == list(range(1, len(results) + 1))
    assert Message.objects.filter(channel__name="bulk").count() == IMPORTED
