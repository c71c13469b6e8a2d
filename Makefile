# Two commands for a fresh machine: `make run` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= 8000
HOST ?= 127.0.0.1
DEMO_USERNAME ?= demo
DEMO_PASSWORD ?= demo-password
export PORT DEMO_USERNAME DEMO_PASSWORD

.PHONY: install run test migrate clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[server,test]"
	touch $@

install: $(VENV)/.installed

migrate: install
	$(PY) manage.py migrate --noinput -v0

run: migrate
	$(PY) manage.py ensure_demo_user --superuser
	$(PY) manage.py ensure_demo_provider
	@echo ""
	@echo "  MCP server:  http://$(HOST):$(PORT)/mcp"
	@echo "  Log in as:   $(DEMO_USERNAME) / $(DEMO_PASSWORD)   (admin: http://$(HOST):$(PORT)/admin/)"
	@echo ""
	$(VENV)/bin/uvicorn project.asgi:application --host $(HOST) --port $(PORT)

test: install
	$(VENV)/bin/pytest

clean:
	rm -rf $(VENV) db.sqlite3
