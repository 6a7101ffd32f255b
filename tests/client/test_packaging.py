"""The project installs the client alone: the console script, the client's package, its own
few dependencies and none of the server's."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVER_ONLY = {"django", "djangorestframework", "channels", "daphne", "channels-redis", "redis"}


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_the_console_script_and_the_package():
    project = _project()
    assert project["project"]["scripts"] == {"agentchat": "agentchat.client.cli:main"}
    assert project["tool"]["setuptools"]["packages"] == ["agentchat.client"]
    # The exit table and the relevance rule the client shares with the server: pure, shipped
    # beside the client.
    assert project["tool"]["setuptools"]["py-modules"] == ["agentchat.exits", "agentchat.relevance"]
    assert project["build-system"]["build-backend"] == "setuptools.build_meta"


def test_what_the_client_imports_of_agentchat_is_shipped():
    shipped = set(_project()["tool"]["setuptools"]["py-modules"])
    imported = set()
    for path in (ROOT / "agentchat" / "client").rglob("*.py"):
        for module in re.findall(
            r"^\s*(?:from|import) (agentchat\.[\w.]+)", path.read_text(), re.M
        ):
            if not module.startswith("agentchat.client"):
                imported.add(module)
    assert imported == shipped


def test_the_client_dependencies_are_the_clients_only():
    names = {
        dep.split(";")[0].split("=")[0].split("<")[0].split(">")[0].strip().lower()
        for dep in _project()["project"]["dependencies"]
    }
    assert names == {"httpx", "websockets", "mcp"}
    assert not names & SERVER_ONLY
    pinned = [dep for dep in _project()["project"]["dependencies"] if dep.startswith("mcp")]
    assert pinned == ["mcp==2.3.0"]  # its 1.x and 2.x APIs differ


def test_the_set_up_installs_the_project():
    makefile = (ROOT / "Makefile").read_text()
    assert "-m pip install --quiet --no-deps -e ." in makefile
