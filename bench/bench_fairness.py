"""Fairness benchmark: agents looping heavy requests must not stall another agent's posts and
peeks (target: the victim's post and peek p99 each under 300 ms).

    .venv/bin/python bench/bench_fairness.py [--seconds 4] [--messages 5000] [--only LABEL]...
        [--json PATH]

On a throwaway SQLite database (``--database-url`` for another): fills ``big`` with
``--messages`` small messages (a tenth of them decisions, never compacted), ``fat`` with 1,000
messages of 15 KB, 200 channels and 200 tasks, starts our server, then for each hog: the victim
(agent ``victim``, its own channel) posts and peeks one after the other for ``--seconds``,
first alone, then while the hog's connections loop their requests. The hogs: each heavy kind
on its own (agent ``hog``, two connections of one token looping the same request), then the
crowds (``SCENARIOS``): one agent's four tokens, four agents, one token's four connections
each looping another kind, four agents beside a victim whose own peek is a megabyte, and the
approvals hog (``--only approvals``: ``--approvals`` pending requests of ``--approval-bytes`` in
``asks``; agent ``hog`` loops GET approvals/, ``limit=1`` and whole, while a signed-in person
loops the dashboard's /help/ and /approvals/: every page counts the pending requests for its
navigation), the websocket hog (``--only ws``: one agent's 16 websockets, the per-agent
cap, each replaying ``fat`` from seq 0 to its end, again and again), and the dashboard hog
(``--only dashboard``): three signed-in people (a browser
session each) loading the state page of ``fatstate``, 80 decisions of 500 KB (a 41 MB summary).
The approvals' and the dashboard's channels are filled only when their scenarios run.
Prints, per hog, the victim's post and peek p50/p95/p99 without and with the hog, the hog's
request count, status codes and bytes. Not part of the test suite.
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
from harness import ROOT, Server, log, migrate, ms, pct, project_env

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

import json
from agentchat.core.identity.services import token_create
tokens = {{}}
for name in ("hog", "hog1", "hog2", "hog3", "victim", "filler"):
    agent = agent_get_or_create(name=name)
    tokens[name] = [token_create(agent=agent) for _ in range(4)]
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
if {approvals}:  # the approvals hog's channel: pending requests of ~400 KB each (issue 17)
    asks = services.channel_create(name="asks", created_by="filler")
    with transaction.atomic():
        Channel.objects.filter(pk=asks.pk).update(last_seq={approvals})
        now = timezone.now()
        for seq in range(1, {approvals} + 1):
            row = Message(id=f"msg_{{uuid.uuid4().hex}}", channel=asks, seq=seq, sender="filler",
                          to=[], recipients="", ts=now, title=f"deploy {{seq}}?",
                          status="needs-approval", body="y" * {approval_bytes})
            row.json_size = message_json_size(row)
            row.save(force_insert=True)
print("TOKENS " + json.dumps(tokens))
"""

# (method, path); method STATE+POST: a post, then GET path; PAGE: GET as a signed-in person
Request = tuple[str, str]
STATE_MD = ("GET", "/api/v1/channels/big/state/?format=md")
SEARCH_ALL = ("GET", "/api/v1/search/?q=fil*+mes*&limit=200")
PEEK_FAT = ("GET", "/api/v1/channels/fat/messages/?after=0&limit=1000")
TASK_LIST = ("GET", "/api/v1/channels/big/tasks/")
HOGS: tuple[tuple[str, Request], ...] = (
    ("state of 5,000 messages (md)", STATE_MD),
    ("state, a post between each", ("STATE+POST", "/api/v1/channels/big/state/")),
    ("search 2 prefixes, all match", SEARCH_ALL),
    ("search 8 short prefixes", ("GET", "/api/v1/search/?q=a*+b*+c*+d*+e*+f*+g*+h*")),
    ("peek limit=1000, 15 KB msgs", PEEK_FAT),
    ("channel list (201)", ("GET", "/api/v1/channels/")),
    ("task list (200 big)", TASK_LIST),
    ("events read", ("GET", "/api/v1/channels/big/events/?limit=1000")),
    ("compaction", ("POST", "/api/v1/channels/big/compact/")),
)
MIX = (STATE_MD, SEARCH_ALL, PEEK_FAT, TASK_LIST)
PEEK_SMALL = "/api/v1/channels/quiet/messages/?limit=20"
PAGE_SESSIONS = 3  # people loading the dashboard hog's page at once, each signed in
APPROVALS_LABEL = "approvals hog"
WS_LABEL = "ws replay"
WS_SOCKETS = 16  # AGENTCHAT_WS_MAX_PER_AGENT's default: what one agent may hold open


def rotated(i: int) -> list[Request]:
    return list(MIX[i:] + MIX[:i])


# A hog's connections: (agent, which of its tokens, the requests it loops).
Client = tuple[str, int, list[Request]]
# label, the hog's connections, the victim's peek
SCENARIOS: tuple[tuple[str, list[Client], str], ...] = (
    ("1 agent x 4 tokens, mixed", [("hog", i, rotated(i)) for i in range(4)], PEEK_SMALL),
    ("4 agents, mixed", [(f"hog{i or ''}", 0, rotated(i)) for i in range(4)], PEEK_SMALL),
    ("1 token x 4, one kind each", [("hog", 0, [MIX[i]]) for i in range(4)], PEEK_SMALL),
    (
        "4 agents; victim peeks 1 MB",
        [(f"hog{i or ''}", 0, rotated(i)) for i in range(4)],
        "/api/v1/channels/fat/messages/?after=0&limit=1000",
    ),
    (  # one agent loops the approvals API, a person the pages that count them for the nav
        f"{APPROVALS_LABEL} (pending x 400 KB), API + pages",
        [
            ("hog", 0, [("GET", "/api/v1/approvals/?limit=1"), ("GET", "/api/v1/approvals/")]),
            ("hog", 1, [("GET", "/api/v1/approvals/"), ("GET", "/api/v1/approvals/?limit=1")]),
            ("person0", 0, [("PAGE", "/help/"), ("PAGE", "/approvals/")]),
        ],
        PEEK_SMALL,
    ),
    (  # one agent's websockets replaying the fat channel from seq 0, again and again
        f"{WS_LABEL}: 1 agent x {WS_SOCKETS} websockets replay fat from 0",
        [("hog", i % 4, [("WS", "/ws/channels/fat/?since=0")]) for i in range(WS_SOCKETS)],
        PEEK_SMALL,
    ),
    (  # a person's "agent" is their user name, signed in through the form
        "dashboard state 41 MB, 3 people",
        [(f"person{i}", 0, [("PAGE", "/c/fatstate/state/")]) for i in range(PAGE_SESSIONS)],
        PEEK_SMALL,
    ),
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


def victim_loop(url: str, token: str, seconds: float, peek: str) -> dict[str, list[float]]:
    """Post then peek, one after the other, for ``seconds``: each request's time."""
    times: dict[str, list[float]] = {"post": [], "peek": []}
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as client:
        end = time.monotonic() + seconds
        n = 0
        while time.monotonic() < end:
            n += 1
            started = time.perf_counter()
            r = client.post("/api/v1/channels/quiet/messages/", json={"title": f"v{n}"})
            times["post"].append(time.perf_counter() - started)
            assert r.status_code == 201, r.text
            started = time.perf_counter()
            r = client.get(peek)
            times["peek"].append(time.perf_counter() - started)
            assert r.status_code == 200, r.text
    return times


def ws_replays(
    url: str, token: str, path: str, stop: threading.Event, out: dict, started: threading.Event
) -> None:
    """Replay ``path`` (a channel's websocket from seq 0) to its last message, again and
    again: each whole replay counts as one request."""
    import asyncio

    import websockets

    async def loop() -> None:
        ws_url = url.replace("http://", "ws://") + path + f"&token={token}"
        while not stop.is_set():
            begun, size, frames = time.perf_counter(), 0, 0
            async with websockets.connect(ws_url, max_size=None) as ws:
                while frames < 1000:  # the fat channel's messages
                    size += len(await ws.recv())
                    frames += 1
            out["times"].append(time.perf_counter() - begun)
            out["codes"]["ws"] += 1
            out["bytes"] = max(out["bytes"], size)
            started.set()

    asyncio.run(loop())


def hog_loop(
    url: str,
    token: str,
    requests: list[Request],
    stop: threading.Event,
    out: dict,
    started: threading.Event,
) -> None:
    if requests[0][0] == "WS":
        ws_replays(url, token, requests[0][1], stop, out, started)
        return
    headers = {"Authorization": f"Bearer {token}"}
    paging = requests[0][0] == "PAGE"  # then ``token`` names the person signed in
    client = (
        signed_in(url, token)
        if paging
        else httpx.Client(base_url=url, headers=headers, timeout=120)
    )
    try:  # the session has made requests: ``with`` would open it again
        n = 0
        while not stop.is_set():
            method, path = requests[n % len(requests)]
            n += 1
            if method == "STATE+POST":
                client.post("/api/v1/channels/big/messages/", json={"title": f"Decision: h{n}"})
            if method in ("STATE+POST", "PAGE"):
                method = "GET"
            begun = time.perf_counter()
            with client.stream(method, path) as r:
                size = sum(len(chunk) for chunk in r.iter_raw())
            out["times"].append(time.perf_counter() - begun)
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


def measure(
    url: str,
    victim: str,
    tokens: dict[str, list[str]],
    clients: list[Client],
    peek: str,
    seconds: float,
) -> dict[str, Any]:
    """The victim alone, then beside the hog's connections (each answered once first)."""
    alone = victim_loop(url, victim, seconds, peek)
    stop = threading.Event()
    out: dict[str, Any] = {"codes": Counter(), "bytes": 0, "times": []}
    started = [threading.Event() for _ in clients]
    hogs = [
        threading.Thread(
            target=hog_loop,
            args=(url, tokens[agent][which], requests, stop, out, first),
            daemon=True,
        )
        for (agent, which, requests), first in zip(clients, started, strict=True)
    ]
    for hog in hogs:
        hog.start()
    for first in started:
        if not first.wait(600):
            raise SystemExit("a hog got no answer in 600 s")
    loaded = victim_loop(url, victim, seconds, peek)
    stop.set()
    for hog in hogs:
        hog.join(120)
    return {
        "alone": {kind: figures(times) for kind, times in alone.items()},
        "with_hog": {kind: figures(times) for kind, times in loaded.items()},
        "hog_requests": sum(out["codes"].values()),
        "hog_codes": dict(out["codes"]),
        "hog_max_bytes": out["bytes"],
        "hog_times": figures(out["times"]),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=4.0, help="of load per measurement")
    parser.add_argument("--messages", type=int, default=5000, help="in the channel 'big'")
    parser.add_argument("--database-url", help="instead of a throwaway SQLite file")
    parser.add_argument(
        "--only", action="append", help="run the hogs whose label holds this (repeatable)"
    )
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--approvals", type=int, default=300, help="pending, in 'asks'")
    parser.add_argument(
        "--approval-bytes", type=int, default=400_000, help="the body of each pending request"
    )
    args = parser.parse_args()
    hogs: list[tuple[str, list[Client], str]] = [
        (label, [("hog", 0, [request])] * 2, PEEK_SMALL) for label, request in HOGS
    ] + list(SCENARIOS)
    hogs = [h for h in hogs if not args.only or any(part in h[0] for part in args.only)]
    # the dashboard hog's people and channel are filled only when it runs
    dashboard = any(loop[0][0] == "PAGE" for _, clients, _ in hogs for _, _, loop in clients)
    approvals = args.approvals if any(APPROVALS_LABEL in h[0] for h in hogs) else 0
    rows = []
    with tempfile.TemporaryDirectory(prefix="agentchat-bench-fairness-") as name:
        tmp = Path(name)
        env = project_env(tmp, database_url=args.database_url)
        migrate(env)
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", SETUP.format(
                messages=args.messages, dashboard=dashboard, sessions=PAGE_SESSIONS,
                approvals=approvals, approval_bytes=args.approval_bytes)],
            cwd=ROOT, env=env, check=True, timeout=900, capture_output=True, text=True,
        )  # fmt: skip
        line = next(x for x in done.stdout.splitlines() if x.startswith("TOKENS "))
        tokens: dict[str, list[str]] = json.loads(line.removeprefix("TOKENS "))
        # a person's credential is their user name: the hog signs in with it
        tokens.update({f"person{i}": [f"person{i}"] for i in range(PAGE_SESSIONS)})
        log(f"filled in {time.perf_counter() - started:.1f} s")
        server = Server(env, tmp / "server.log")
        try:
            victim = tokens["victim"][0]
            victim_loop(server.url, victim, 0.5, PEEK_SMALL)  # warm
            for label, clients, peek in hogs:
                row = {
                    "hog": label,
                    **measure(server.url, victim, tokens, clients, peek, args.seconds),
                }
                log(json.dumps(row))
                rows.append(row)
        finally:
            server.stop()
    print(
        f"{'hog':30} {'victim':6} {'alone p50/p95/p99 ms':>22} {'with hog p50/p95/p99 ms':>25} "
        f"{'hog reqs':>8} {'hog codes':>18} {'hog max B':>10}  p99<{TARGET_MS:.0f}"
    )
    for row in rows:
        codes = ",".join(f"{k}x{v}" for k, v in sorted(row["hog_codes"].items(), key=str))
        for kind in ("post", "peek"):
            a, w = row["alone"][kind], row["with_hog"][kind]
            verdict = "ok" if w["p99_ms"] < TARGET_MS else "MISSED"
            print(
                f"{row['hog'] if kind == 'post' else '':30} {kind:6} "
                f"{a['p50_ms']:>6}/{a['p95_ms']:>6}/{a['p99_ms']:>7} "
                f"{w['p50_ms']:>8}/{w['p95_ms']:>6}/{w['p99_ms']:>7} "
                + (
                    f"{row['hog_requests']:>8} {codes:>18} {row['hog_max_bytes']:>10}"
                    if kind == "post"
                    else f"{'':>8} {'':>18} {'':>10}"
                )
                + f"  {verdict}"
            )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
