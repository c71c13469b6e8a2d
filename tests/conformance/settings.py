"""Settings of the conformance fixture server (tests only): the reference project without its demo
apps, plus ``tests.conformance.fixture``, whose ``mcp_tools`` / ``mcp_resources`` / ``mcp_prompts``
serve the tools, resources and prompts the official conformance scenarios name.

| variable | meaning |
| --- | --- |
| CONFORMANCE_DB | SQLite file of the fixture server (run.py makes a fresh one per run) |
| PORT / MCP_BASE_URL | as in ``project.settings`` |
"""

import os

from project.settings import *  # noqa: F403

INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in ("project", "elicitation")]  # noqa: F405
INSTALLED_APPS.append("tests.conformance.fixture")
ROOT_URLCONF = "tests.conformance.fixture.urls"
# As the reference site on SQLite: wait on locks, and BEGIN IMMEDIATE so that a task's thread and a
# request that both read then write wait for each other instead of one failing "database is locked".
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("CONFORMANCE_DB", ":memory:"),
        "OPTIONS": {"timeout": 30, "transaction_mode": "IMMEDIATE"},
    }
}
CELERY_TASK_ALWAYS_EAGER = True
CELERY_BROKER_URL = None
MCP_OAUTH = {
    **MCP_OAUTH,  # noqa: F405
    "DEFAULT_RESOURCE_NAME": "conformance fixture",
    "SERVER_NAME": "django-mcp-authz-conformance",
    "SSE_POLL_INTERVAL_SECONDS": 0.05,
    "TASKS_POLL_INTERVAL_MS": 200,
    "TASKS_CANCEL_POLL_SECONDS": 0.2,
    "TASKS_QUEUE_GRACE_SECONDS": 2,  # SQLite may refuse a thread's claim: the next tasks/get heals it
}
LOGGING = {"version": 1, "disable_existing_loggers": False}
