"""With DEBUG off the reference site logs a 500 with its traceback to stderr (project/settings.py
LOGGING): an operator sees why a request failed, not only that it did.

A live uvicorn process of the reference site (DEBUG off, plain http on loopback) whose login page
fails (tests/support/broken_page_settings.py): GET answers 500, and the process's stderr holds the
``django.request`` error line and the traceback naming the missing template.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from tests.support.live import free_port

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.e2e


def test_a_500_without_debug_logs_its_traceback_to_stderr(tmp_path):
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "USER")},
        "DJANGO_SETTINGS_MODULE": "tests.support.broken_page_settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
        "DJANGO_SECRET_KEY": "error-logging-" + "x" * 40,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "MCP_BASE_URL": f"http://127.0.0.1:{port}",
    }
    stderr = tmp_path / "stderr.log"
    with stderr.open("w") as errors:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "project.asgi:application",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=errors,
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, stderr.read_text()
            try:
                response = httpx2.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
                break
            except httpx2.HTTPError:
                assert time.monotonic() < deadline, stderr.read_text()
                time.sleep(0.2)
        assert response.status_code == 500
        assert "Traceback" not in response.text  # DEBUG off: no technical page
        deadline = time.monotonic() + 5
        while "TemplateDoesNotExist" not in stderr.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(timeout=10)
    logged = stderr.read_text()
    assert "Internal Server Error: /accounts/login/" in logged, logged
    assert "Traceback (most recent call last):" in logged, logged
    assert "TemplateDoesNotExist: broken/base.html" in logged or "TemplateDoesNotExist" in logged, logged
