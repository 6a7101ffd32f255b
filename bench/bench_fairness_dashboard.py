"""The dashboard hog beside the per-kind hogs of bench_fairness.py (issue 17).

Fairness benchmark: one agent looping a heavy request must not stall another agent's posts
and peeks (target: the victim's p99 under 300 ms).

    .venv/bin/python bench/bench_fairness.py [--seconds 4] [--messages 5000] [--json PATH]

On a throwaway SQLite database (``--database-url`` for another): fills ``big`` with
``--messages`` small messages (a tenth of them decisions, never compacted), ``fat`` with 1,000
messages of 15 KB, 200 channels and 200 tasks, starts our server, then for each hog kind: the
victim (agent ``victim``, its own channel) posts and peeks one after the other for
``--seconds``, first alone, then while the hog (agent ``hog``, two connections looping the same
request) runs. Prints, per hog kind, the victim's p50/p95/p99 without and with the hog, the
hog's request count, status codes and bytes. Not part of the test suite.

The dashboard hog (``--only dashboard``) is three signed-in people (each a browser session of
their own) loading the state page of ``fatstate``, 80 decisions of 500 KB (a 41 MB summary),
while the victim posts and peeks; ``fatstate`` is filled only when that hog runs.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ROOT, Server, create_tokens, log, migrate, ms, pct, project_env

TARGET_MS = 300.0
SETUP = """
import uuid
from django.db import connection, transaction
from django.utils import timezone
from agentchat.core.identity.services import agent_get_or_create
from channels_app import services
from channels_app.models import Channel, Message
from channels_app.records import message_json_size
from tasks_app.services import task_create

for name in ("hog", "victim", "filler"):
    agent_get_or_create(name=name)
services.channel_create(name="quiet", created_by="victim")

def fill(name, count, body, decision_every):
    channel = services.channel_create(name=name, created_by="filler")
    with transaction.atomic():
        Channel.objects.filter(pk=channel.pk).update(last_seq=count)
        now = timezone.now()
        rows = []
        for seq in range(1, count + 1):
            title = f"Decision: option {{seq}}" if seq % decision_every == 0 else f"fill {{seq}}"
            row = Message(id=f"msg_{{uuid.uuid4().hex}}", channel=channel, seq=seq,
                          sender="filler", to=[], recipients="", ts=now, title=title,
                          body=body.format(seq=seq))
            row.json_size = message_json_size(row)
            rows.append(row)
        Message.objects.bulk_create(rows, batch_size=1000)

fill("big", {messages}, "filler message {{seq}} about the plan", 10)
fill("fat", 1000, "x" * 15000 + " {{seq}}", 1000000)
for i in range(200):
    services.channel_create(name=f"room-{{i:03d}}", created_by="filler", topic="t" * 200)
big = Channel.objects.get(name="big")
for i in range(200):
    task_create(channel=big, created_by="filler", task_id=f"t{{i:03d}}", title=f"task {{i}} " * 10)
if {dashboard}:
    from django.contrib.auth import get_user_model
    for i in range({sessions}):
        get_user_model().objects.create_user(f"person{{i}}", password="bench-password")
    fat = services.channel_create(name="fatstate", created_by="filler")
    line = "a line of the decision's reasons, written out at length. " * 2 + "\\n"
    body = (line * (500_000 // len(line) + 1))[:500_000]
    for i in range(80):
        services.message_post(channel=fat, sender="filler", title=f"Decision: {{i}}", body=body)
"""
PAGE_SESSIONS = 3  # people loading the dashboard hog's page at once, each signed in

HOGS: tuple[tuple[str, str, str], ...] = (
    ("state of 5,000 messages (md)", "GET", "/api/v1/channels/big/state/?format=md"),
    ("state, a post between each", "STATE+POST", "/api/v1/channels/big/state/"),
    ("search 2 prefixes, all match", "GET", "/api/v1/search/?q=fil*+mes*&limit=200"),
    ("search 8 short prefixes", "GET", "/api/v1/search/?q=a*+b*+c*+d*+e*+f*+g*+h*"),
    ("peek limit=1000, 15 KB msgs", "GET", "/api/v1/channels/fat/messages/?after=0&limit=1000"),
    ("channel list (201)", "GET", "/api/v1/channels/"),
    ("task list (200 big)", "GET", "/api/v1/channels/big/tasks/"),
    ("events read", "GET", "/api/v1/channels/big/events/?limit=1000"),
    ("compaction", "POST", "/api/v1/channels/big/compact/"),
    ("dashboard state 41 MB, 3 people", "PAGE", "/c/fatstate/state/"),
)


def signed_in(url: str, person: str) -> httpx.Client:
    """A browser session: signed in through the form, its cookies kept."""
    client = httpx.Client(base_url=url, timeout=300, follow_redirects=False)
    form = client.get("/signin/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)
    assert token, "no CSRF token on the sign-in form"
    signed = client.post(
        "/signin/",
        data={"username": person, "password": "bench-password",
              "csrfmiddlewaretoken": token.group(1)},
    )  # fmt: skip
    assert signed.status_code == 302, signed.status_code
    return client


def victim_loop(url: str, token: str, seconds: float) -> list[float]:
    """Post then peek, one after the other, for ``seconds``: each request's time."""
    times: list[float] = []
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            n += 1
            started = time.perf_counter()
            r = client.post("/api/v1/channels/quiet/messages/", json={"title": f"v{n}"})
            times.append(time.perf_counter() - started)
            assert r.status_code == 201, r.text
            started = time.perf_counter()
            r = client.get("/api/v1/channels/quiet/messages/?limit=20")
            times.append(time.perf_counter() - started)
            assert r.status_code == 200, r.text
    return times


def hog_loop(
    url: str,
    token: str,
    method: str,
    path: str,
    stop: threading.Event,
    out: dict,
    started: threading.Event,
) -> None:
    headers = {"Authorization": f"Bearer {token}"}
    if method == "PAGE":  # token names the person signed in
        client = signed_in(url, token)
    else:
        client = httpx.Client(base_url=url, headers=headers, timeout=120)
    try:
        n = 0
        while not stop.is_set():
            n += 1
            if method == "STATE+POST":
                client.post("/api/v1/channels/big/messages/", json={"title": f"Decision: h{n}"})
                method_now = "GET"
            else:
                method_now = "GET" if method == "PAGE" else method
            with client.stream(method_now, path) as r:
                size = sum(len(chunk) for chunk in r.iter_raw())
            out["codes"][r.status_code] += 1
            out["bytes"] = max(out["bytes"], size)
            started.set()  # answered once: the hog's loop is under way
    finally:
        client.close()


def figures(times: list[float]) -> dict[str, Any]:
    return {
        "n": len(times),
        "p50_ms": ms(pct(times, 0.5)),
        "p95_ms": ms(pct(times, 0.95)),
        "p99_ms": ms(pct(times, 0.99)),
        "max_ms": ms(max(times)) if times else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="of load per measurement")
    parser.add_argument("--messages", type=int, default=5000, help="in the channel 'big'")
    parser.add_argument("--database-url", help="instead of a throwaway SQLite file")
    parser.add_argument("--only", help="run the hog kinds whose label holds this")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()
    dashboard = any(
        method == "PAGE" and (not args.only or args.only in label) for label, method, _ in HOGS
    )
    rows = []
    with tempfile.TemporaryDirectory(prefix="agentchat-bench-fairness-") as name:
        tmp = Path(name)
        env = project_env(tmp, database_url=args.database_url)
        migrate(env)
        started = time.perf_counter()
        setup = SETUP.format(messages=args.messages, dashboard=dashboard, sessions=PAGE_SESSIONS)
        subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", setup],
            cwd=ROOT, env=env, check=True, timeout=900,
        )  # fmt: skip
        log(f"filled in {time.perf_counter() - started:.1f} s")
        tokens = create_tokens(env, ["hog", "victim"])
        server = Server(env, tmp / "server.log")
        try:
            victim_loop(server.url, tokens["victim"], 0.5)  # warm
            for label, method, path in HOGS:
                if args.only and args.only not in label:
                    continue
                alone = victim_loop(server.url, tokens["victim"], args.seconds)
                stop = threading.Event()
                out: dict[str, Any] = {"codes": Counter(), "bytes": 0}
                # Two connections of the hog's token; the dashboard hog: one session per person.
                who = (
                    [f"person{i}" for i in range(PAGE_SESSIONS)]
                    if method == "PAGE"
                    else [tokens["hog"]] * 2
                )
                started = [threading.Event() for _ in who]
                hogs = [
                    threading.Thread(
                        target=hog_loop,
                        args=(server.url, credential, method, path, stop, out, first),
                        daemon=True,
                    )
                    for credential, first in zip(who, started, strict=True)
                ]
                for hog in hogs:
                    hog.start()
                # The hogs' loops under way (each answered once) before the victim measures.
                for first in started:
                    if not first.wait(600):
                        raise SystemExit(f"the {label} hog got no answer in 600 s")
                loaded = victim_loop(server.url, tokens["victim"], args.seconds)
                stop.set()
                for hog in hogs:
                    hog.join(120)
                row = {
                    "hog": label,
                    "alone": figures(alone),
                    "with_hog": figures(loaded),
                    "hog_requests": sum(out["codes"].values()),
                    "hog_codes": dict(out["codes"]),
                    "hog_max_bytes": out["bytes"],
                }
                log(json.dumps(row))
                rows.append(row)
        finally:
            server.stop()
    print(
        f"{'hog':32} {'alone p50/p95/p99 ms':>22} {'with hog p50/p95/p99 ms':>25} "
        f"{'hog reqs':>8} {'hog codes':>18} {'hog max B':>10}  p99<{TARGET_MS:.0f}"
    )
    for row in rows:
        a, w = row["alone"], row["with_hog"]
        verdict = "ok" if w["p99_ms"] < TARGET_MS else "MISSED"
        codes = ",".join(f"{k}x{v}" for k, v in sorted(row["hog_codes"].items()))
        print(
            f"{row['hog']:32} {a['p50_ms']:>6}/{a['p95_ms']:>6}/{a['p99_ms']:>7} "
            f"{w['p50_ms']:>8}/{w['p95_ms']:>6}/{w['p99_ms']:>7} {row['hog_requests']:>8} "
            f"{codes:>18} {row['hog_max_bytes']:>10}  {verdict}"
        )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
