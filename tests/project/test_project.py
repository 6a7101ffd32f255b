"""Project-level behaviour: settings guards, the front page, the schema, the token command."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import connection

from agentchat.core.models import Agent, ApiToken, token_digest
from tests.conftest import ROOT


@pytest.mark.django_db
def test_database_is_configured_for_concurrent_writers():
    if connection.vendor == "sqlite":
        # WAL, IMMEDIATE transactions and a long busy timeout: writers queue, never fail.
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA journal_mode")
            assert cursor.fetchone()[0] == "wal"
            cursor.execute("PRAGMA busy_timeout")
            assert cursor.fetchone()[0] >= 20000
        assert connection.transaction_mode == "IMMEDIATE"
    else:
        assert connection.vendor == "postgresql"
        # Persistent connections leak under ASGI: a bounded pool instead.
        assert connection.settings_dict["CONN_MAX_AGE"] == 0
        assert connection.settings_dict["OPTIONS"]["pool"]["max_size"] >= 4


@pytest.mark.django_db
def test_the_help_page_names_server_version_and_docs(client, settings, django_user_model):
    settings.VERSION = "9.8.7-test"  # the page shows the setting, not a copy of its value
    client.force_login(django_user_model.objects.create_user("ann", password="pw"))
    r = client.get("/help/")
    assert r.status_code == 200
    text = r.content.decode()
    assert "AgentChat server" in text
    assert "9.8.7-test" in text
    assert "/api/v1/docs/" in text


def test_the_version_is_the_project_s():
    import tomllib

    from django.conf import settings

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == settings.VERSION
    assert project["version"] == settings.SPECTACULAR_SETTINGS["VERSION"]


def test_unknown_page_is_a_friendly_404(client):
    r = client.get("/nothing")
    assert r.status_code == 404
    assert "/api/v1/docs/" in r.content.decode()


@pytest.mark.django_db
def test_openapi_schema_and_offline_docs(api_client):
    r = api_client.get("/api/v1/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert r.status_code == 200
    import json

    schema = json.loads(r.content)
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/channels/{name}/messages/" in schema["paths"]
    docs = api_client.get("/api/v1/docs/").content.decode()
    assert "swagger-ui" in docs
    assert "cdn" not in docs.lower()  # assets are served locally (sidecar)


@pytest.mark.django_db
def test_create_agent_token_prints_only_the_token_and_stores_its_hash():
    out = io.StringIO()
    call_command("create_agent_token", "zed", stdout=out)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1
    token = lines[0]
    assert ApiToken.objects.get(agent__name="zed").digest == token_digest(token)
    call_command("create_agent_token", "zed", stdout=io.StringIO())
    assert Agent.objects.filter(name="zed").count() == 1
    assert ApiToken.objects.filter(agent__name="zed").count() == 2


@pytest.mark.django_db
@pytest.mark.parametrize(("first", "then"), [((), ("--human",)), (("--human",), ())])
def test_create_agent_token_refuses_an_agent_of_the_other_kind(first, then):
    from django.core.management.base import CommandError

    call_command("create_agent_token", "a2", *first, stdout=io.StringIO())
    kind = Agent.objects.get(name="a2").kind
    with pytest.raises(CommandError, match="INVALID_VALUE: agent 'a2' exists as kind"):
        call_command("create_agent_token", "a2", *then, stdout=io.StringIO())
    assert Agent.objects.get(name="a2").kind == kind
    assert ApiToken.objects.filter(agent__name="a2").count() == 1


@pytest.mark.django_db
def test_create_agent_token_refuses_a_bad_name():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="INVALID_NAME"):
        call_command("create_agent_token", "Bad Name", stdout=io.StringIO())
    assert not Agent.objects.exists()


@pytest.mark.django_db
def test_revoke_agent_tokens():
    call_command("create_agent_token", "yan", stdout=io.StringIO())
    out = io.StringIO()
    call_command("revoke_agent_tokens", "yan", stdout=out)
    assert "revoked 1" in out.getvalue()
    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists()


def test_openapi_schema_is_valid_without_warnings(tmp_path):
    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    text = out.read_text()
    assert "/api/v1/channels/{name}/wait/:" in text  # the live endpoint route is documented too
    assert "/api/v1/channels/{name}/tasks/{task_id}/claim/:" in text
    assert "/api/v1/channels/{name}/locks/check/:" in text


def test_the_roof_is_an_installed_app_so_its_management_commands_load():
    # Django looks for commands in <app path>/management/commands/ of every installed app.
    config = apps.get_app_config("agentchat")
    assert Path(config.path) == ROOT / "agentchat"
    assert (Path(config.path) / "management" / "commands" / "__init__.py").is_file()


def test_a_foreign_host_on_a_django_page_is_400_and_logs_no_traceback(tmp_path):
    # Any client could otherwise fill the log with DisallowedHost tracebacks (the hostile run).
    # In a process of its own: pytest's log capture would hide what the settings' logging does.
    code = (
        "from django.test import Client; "
        "print(Client().get('/admin/login/', HTTP_HOST='evil.example').status_code)"
    )
    done = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", code],
        cwd=ROOT,
        env={**os.environ, "AGENTCHAT_DATA_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.strip().splitlines()[-1] == "400", done.stderr
    assert "Invalid HTTP_HOST" not in done.stderr and "Traceback" not in done.stderr
