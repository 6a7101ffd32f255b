"""The data folder: made where a process starts, not by importing the settings; the secret key
generated once there and shared by every process of the deployment."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentchat.datadir import SECRET_KEY_FILE, secret_key_ensure, secret_key_read
from tests.conftest import ROOT


def run_python(args: list[str], data: Path, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in {"SECRET_KEY", "DEBUG"}}
    return subprocess.run(
        [sys.executable, *args],
        cwd=ROOT,
        env={**clean, "AGENTCHAT_DATA_DIR": str(data), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


PRINT_KEY = "from django.conf import settings; print(settings.SECRET_KEY)"


def test_importing_the_settings_creates_no_folder(tmp_path):
    data, elsewhere = tmp_path / "data", tmp_path / "elsewhere"
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "print(settings.STATIC_ROOT, settings.DATABASES['default']['NAME'])"
    )
    out = run_python(
        ["-c", code],
        data,
        DJANGO_SETTINGS_MODULE="agentchat.settings",
        DATABASE_URL=f"sqlite:///{elsewhere / 'db.sqlite3'}",
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == [str(data / "staticfiles"), str(elsewhere / "db.sqlite3")]
    assert not data.exists()
    assert not elsewhere.exists()


def test_every_command_of_a_deployment_signs_with_one_key_kept_in_the_data_folder(tmp_path):
    data = tmp_path / "data"
    first = run_python(["manage.py", "shell", "-v", "0", "-c", PRINT_KEY], data)
    second = run_python(["manage.py", "shell", "-v", "0", "-c", PRINT_KEY], data)
    assert first.returncode == 0 and second.returncode == 0, (first.stderr, second.stderr)
    key = first.stdout.strip()
    assert len(key) >= 50
    assert second.stdout.strip() == key
    key_file = data / SECRET_KEY_FILE
    assert key_file.read_text().strip() == key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert (data / "staticfiles").is_dir()


def test_secret_key_from_the_environment_wins_and_no_file_is_made(tmp_path):
    data = tmp_path / "data"
    out = run_python(["manage.py", "shell", "-v", "0", "-c", PRINT_KEY], data, SECRET_KEY="k" * 50)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "k" * 50
    assert not (data / SECRET_KEY_FILE).exists()


def test_processes_starting_together_agree_on_one_key(tmp_path):
    start = threading.Barrier(16)
    keys: list[str] = []

    def start_up() -> None:
        start.wait(10)
        keys.append(secret_key_ensure(tmp_path))

    threads = [threading.Thread(target=start_up) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(keys) == 16
    assert len(set(keys)) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == [SECRET_KEY_FILE]  # no leftovers


@pytest.mark.parametrize("content", ["", "\n", "short"])
def test_a_key_file_without_a_key_stops_the_start_rather_than_signing_everyone_out(
    tmp_path, content
):
    (tmp_path / SECRET_KEY_FILE).write_text(content)
    with pytest.raises(RuntimeError, match="holds no usable secret key"):
        secret_key_read(tmp_path)
    out = run_python(["manage.py", "check"], tmp_path)
    assert out.returncode != 0
    assert "holds no usable secret key" in out.stderr
    assert (tmp_path / SECRET_KEY_FILE).read_text() == content
