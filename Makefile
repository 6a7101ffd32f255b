# AgentChat server. `make run` starts the server on http://127.0.0.1:8000; `make test` runs the
# whole suite. Both create .venv on first use: `make run` installs what runs (requirements.txt
# and the project: the `agentchat` command, .venv/bin/agentchat), `make test` and `make lint`
# the tests' and lint's tools on top (requirements-dev.txt).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEV_STAMP := $(VENV)/.installed-dev
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run test lint format bench migrate token clean

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

$(DEV_STAMP): $(STAMP) requirements-dev.txt
	$(PY) -m pip install --quiet -r requirements-dev.txt
	touch $(DEV_STAMP)

migrate: $(STAMP)
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput --verbosity 0

run: migrate
	@echo "AgentChat server on http://$(HOST):$(PORT)/  (create a token: $(PY) manage.py create_agent_token NAME)"
	$(PY) -m agentchat.serve --host $(HOST) --port $(PORT)

# In pytest-xdist workers, one per CPU (tests/conftest.py gives each its own test database and
# Redis database); PYTEST_WORKERS=0 runs it in one process.
PYTEST_WORKERS ?= auto
test: $(DEV_STAMP)
	$(PY) -m pytest -n $(PYTEST_WORKERS)

# ruff, the layers of DESIGN §3 (import-linter contracts in pyproject.toml), then mypy
# ([tool.mypy] in pyproject.toml: strict on the floor, the client and tasks_app).
lint: $(DEV_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports --no-logo
	$(VENV)/bin/mypy

format: $(DEV_STAMP)
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: $(STAMP)
	$(PY) bench/bench_core.py

clean:
	rm -rf $(VENV) var/test-*.sqlite3*
