"""Static files under uvicorn without DEBUG, as in production: ``collectstatic``, then WhiteNoise serves them.

The reference project runs as a subprocess (``DJANGO_DEBUG=0``, its own SQLite file and
``DJANGO_STATIC_ROOT`` in a temporary folder): the admin login page links hashed stylesheet names
(``CompressedManifestStaticFilesStorage``), each answers 200 ``text/css`` with a long cache
lifetime, and a compressed variant is served to a client that accepts it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from tests.support.live import free_port

REPO_DIR = Path(__file__).resolve().parents[1]


@pytest.fixture
def production_site(tmp_path):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("CELERY_", "DJANGO_", "MCP_", "DATABASE_"))
    }
    env.update(
        DJANGO_SETTINGS_MODULE="project.settings",
        DJANGO_DEBUG="0",
        DJANGO_SECURE_SSL_REDIRECT="0",  # plain http on loopback in this test
        DJANGO_STATIC_ROOT=str(tmp_path / "static"),
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite3'}",
        PORT=str(port),
        PYTHONUNBUFFERED="1",
    )
    collected = subprocess.run(
        [sys.executable, "manage.py", "collectstatic", "--noinput", "-v0"],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert collected.returncode == 0, collected.stdout + collected.stderr
    log = open(tmp_path / "server.log", "w")  # closed below
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "project.asgi:application", "--host", "127.0.0.1", "--port", str(port)],
        cwd=REPO_DIR,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert server.poll() is None, (tmp_path / "server.log").read_text()
            try:
                httpx2.get(base + "/static/admin/css/base.css", timeout=2)
                break
            except httpx2.HTTPError:
                assert time.monotonic() < deadline, (tmp_path / "server.log").read_text()
                time.sleep(0.1)
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def test_admin_css_is_served_by_uvicorn_without_debug_after_collectstatic(production_site):
    page = httpx2.get(production_site + "/admin/login/", timeout=10)
    assert page.status_code == 200
    stylesheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', page.text)
    assert any(re.fullmatch(r"/static/admin/css/base\.[0-9a-f]{12}\.css", href) for href in stylesheets), stylesheets
    for href in stylesheets:
        response = httpx2.get(production_site + href, timeout=10, headers={"Accept-Encoding": "identity"})
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/css"), href
        assert "immutable" in response.headers["cache-control"]  # hashed name: cached for good
    compressed = httpx2.get(production_site + stylesheets[0], timeout=10, headers={"Accept-Encoding": "gzip"})
    assert compressed.headers.get("content-encoding") == "gzip"
