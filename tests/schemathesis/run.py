"""Schemathesis against a real server: ``python -m tests.schemathesis.run`` (``.ci/run`` calls it).

A throwaway data folder and database (SQLite unless ``DATABASE_URL`` names a PostgreSQL
database of its own), two agents with real tokens, a server started with
``agentchat.serve.ServerProcess``, a channel, messages, a task, a lock, a whiteboard entry and
a signal for the generated requests to find (``hooks.py`` draws path parameters from them as
well as from the schema),
then ``st run`` over ``/api/v1/schema/``: a fixed seed and an example budget per operation, one
worker (the machine has 2 cores), the examples, coverage and fuzzing phases, positive and
negative data, and the checks

- ``not_a_server_error``: no 5xx;
- ``status_code_conformance``: no status the operation does not document;
- ``content_type_conformance``, ``response_schema_conformance``: every response, errors
  included (an error's code must be one the operation declares), matches the schema;
- ``positive_data_accepted`` (``hooks.py``): a request valid by the schema is not refused,
  except for the rules the schema cannot state, each checked there;
- ``ignored_auth``: an operation that declares the bearer scheme refuses a request without it.

Timing must not decide the outcome on a loaded machine: Hypothesis's ``too_slow`` health check
is off and a request may take 30 s (a generated wait parks half a second at most).

Exit status: schemathesis's (0 when every check passed). Extra arguments go to ``st run``
(``--max-examples 5`` for a quick look).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from agentchat.serve import ROOT, ServerProcess

SEED = 20261201
MAX_EXAMPLES = 40
AGENTS = ("st-alice", "st-bob")
CHANNEL = "st-main"
TASK = "T-1"

CHECKS = (
    "not_a_server_error",
    "status_code_conformance",
    "content_type_conformance",
    "response_schema_conformance",
    "positive_data_accepted",
    "ignored_auth",
)


def manage(env: dict[str, str], *args: str) -> str:
    python = sys.executable
    done = subprocess.run(
        [python, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def call(base: str, token: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}{path}",
        data=data,
        method=method,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def seed(base: str, tokens: dict[str, str]) -> dict[str, list[str]]:
    """Objects for the generated requests to find; returns the known path parameters."""
    alice, bob = (tokens[name] for name in AGENTS)
    call(base, alice, "POST", "/api/v1/channels/", {"name": CHANNEL, "members": list(AGENTS)})
    for number in range(3):
        call(base, alice, "POST", f"/api/v1/channels/{CHANNEL}/messages/", {"title": f"m{number}"})
        call(base, bob, "POST", f"/api/v1/channels/{CHANNEL}/messages/", {"title": f"r{number}"})
    call(base, alice, "POST", f"/api/v1/channels/{CHANNEL}/tasks/", {"id": TASK, "title": "t"})
    lock = call(base, bob, "POST", f"/api/v1/channels/{CHANNEL}/locks/", {"paths": ["src/held.py"]})
    call(base, bob, "PUT", f"/api/v1/channels/{CHANNEL}/whiteboard/goal/", {"value": {"v": 1}})
    call(base, bob, "POST", f"/api/v1/channels/{CHANNEL}/signals/", {"to": "*", "content": "s"})
    # HTTP v1: envelopes both ways, a card each, a contact share to alice (the run's token).
    first, second = AGENTS
    call(base, alice, "POST", f"/v1/agents/{first}/messages", {"to": second, "text": "hi"})
    call(base, bob, "POST", f"/v1/agents/{second}/messages", {"to": first, "id": "st-1"})
    call(base, alice, "PUT", f"/v1/agents/{first}/contacts/{second}", {"id": second})
    call(base, bob, "PUT", f"/v1/agents/{second}/contacts/{first}", {"id": first})
    share = call(
        base, bob, "POST", f"/v1/agents/{second}/contact-shares", {"to": first, "contact_id": first}
    )
    return {
        "name": [CHANNEL],
        "task_id": [TASK],
        "lock_id": [lock["lock_id"]],
        "marker": ["m1"],
        "key": ["goal"],
        "agent_id": [first],
        "contact_id": [second],
        "message_id": [share["id"], "st-1"],
    }


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="agentchat-st-") as tmp:
        data_dir = Path(tmp)
        env = {
            **os.environ,
            "AGENTCHAT_DATA_DIR": str(data_dir),
            "DJANGO_SETTINGS_MODULE": "agentchat.settings",
            # The schema's maximum follows: generated waits park half a second at most.
            "AGENTCHAT_WAIT_MAX_TIMEOUT": "0.5",
            # The admin monitor exists (the run's agent token is refused there, 403).
            "AGENT_CHAT_ADMIN_TOKEN": "st-admin-" + "x" * 32,
        }
        env.setdefault("DATABASE_URL", f"sqlite:///{data_dir / 'st.sqlite3'}")
        manage(env, "migrate", "--noinput", "--verbosity", "0")
        tokens = {name: manage(env, "create_agent_token", name) for name in AGENTS}
        server = ServerProcess(env=env, log_dir=data_dir)
        try:
            known = seed(server.url, tokens)
            tolerated = data_dir / "tolerated.txt"
            tolerated.touch()
            st_env = {
                **env,
                "SCHEMATHESIS_HOOKS": "tests.schemathesis.hooks",
                "AGENTCHAT_ST_KNOWN": json.dumps(known),
                "AGENTCHAT_ST_TOLERATED": str(tolerated),
                "PYTHONPATH": str(ROOT),
            }
            command = [
                str(Path(sys.executable).with_name("st")),
                "--config-file",
                str(Path(__file__).with_name("schemathesis.toml")),
                "run",
                f"{server.url}/api/v1/schema/?format=json",
                "--url",
                f"{server.url}",
                "--header",
                f"Authorization: Bearer {tokens[AGENTS[0]]}",
                "--checks",
                ",".join(CHECKS),
                "--phases",
                "examples,coverage,fuzzing",
                "--mode",
                "all",
                "--seed",
                str(SEED),
                "--max-examples",
                str(MAX_EXAMPLES),
                "--workers",
                "1",
                "--generation-database",
                "none",
                "--continue-on-failure",
                "--suppress-health-check",
                "too_slow",
                "--request-timeout",
                "30",
                "--no-color",
                *argv,
            ]
            status = subprocess.run(command, cwd=ROOT, env=st_env, check=False).returncode
        finally:
            server.stop()
        counts = Counter(tolerated.read_text().splitlines())
        print(f"\nrefusals of schema-valid requests tolerated (hooks.py): {counts.total()}")
        for line, count in sorted(counts.items()):
            print(f"  {count:5}  {line}")
        if status != 0:
            print(f"server log: {server.log_path}", file=sys.stderr)
            print(server.output()[-5000:], file=sys.stderr)
        return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
