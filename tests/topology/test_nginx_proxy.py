"""The nginx configuration of docs/how-to/production.md, run: a real nginx on loopback terminates
TLS (a throw-away certificate, tests/support/https_server.py) in front of the reference site (uvicorn,
DEBUG off, behind-the-proxy settings), on a port other than 443 so that ``Host $host`` carries no
port while the browser's ``Origin`` does. A user signs in through it the way a browser does (the
login page's CSRF cookie and token, ``Origin`` and ``Referer`` of the page): the POST is accepted
(302 to the next page, then 200), not refused with CSRF 403; the pages are secure (no redirect to
https again, ``Secure`` cookies) and the discovery document names the public origin.

Skipped when nginx is not installed (.ci/run installs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.https_server import shared_pki
from tests.support.live import free_port
from tests.support.topology import database_url

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
PASSWORD = "correct horse battery"


def documented_server_block() -> str:
    """The ```nginx block of docs/how-to/production.md."""
    text = (ROOT / "docs" / "how-to" / "production.md").read_text()
    match = re.search(r"```nginx\n(.*?)```", text, re.S)
    assert match, "docs/how-to/production.md has no nginx example"
    return match.group(1)


def nginx_config(directory: Path, port: int, backend_port: int) -> Path:
    pki = shared_pki()
    server = (
        documented_server_block()
        .replace("listen 443 ssl;", f"listen 127.0.0.1:{port} ssl;")
        .replace("server_name mcp.example.com;", "server_name localhost;")
        .replace("/etc/ssl/mcp.example.com/fullchain.pem", str(pki.cert_file))
        .replace("/etc/ssl/mcp.example.com/privkey.pem", str(pki.key_file))
        .replace("http://127.0.0.1:8000", f"http://127.0.0.1:{backend_port}")
    )
    assert str(pki.cert_file) in server and f":{backend_port}" in server, server
    temp = "\n".join(
        f"    {name}_temp_path {directory / name};" for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    config = directory / "nginx.conf"
    config.write_text(
        ("user root;\n" if os.geteuid() == 0 else "")
        + f"worker_processes 1;\npid {directory / 'nginx.pid'};\nerror_log {directory / 'error.log'} warn;\n"
        + "events { worker_connections 64; }\n"
        + f"http {{\n    access_log off;\n{temp}\n{server}\n}}\n"
    )
    return config


@pytest.fixture
def behind_nginx(tmp_path, django_user_model, settings):
    if not os.path.exists(NGINX):
        pytest.skip("nginx is not installed (apt-get install -y nginx)")
    port, backend_port = free_port(), free_port()
    public = f"https://localhost:{port}"
    env = {
        **{k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR", "USER")},
        "DATABASE_URL": database_url(),
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "nginx-proxy-test-" + "x" * 40,
        "MCP_BASE_URL": public,
        "DJANGO_ALLOWED_HOSTS": "localhost",
        "DJANGO_SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
        "ELICITATION_ENCRYPTION_KEYS": "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8=",
        "MCP_REQUEST_STATE_KEYS": "nginx-request-state-" + "y" * 30,
    }
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # one the site has
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": public}
    ensure_default_resource()  # the site's protected resource: https://localhost:<port>/mcp
    django_user_model.objects.create_user("alice", "alice@example.com", PASSWORD)
    log = tmp_path / "site.log"
    with log.open("w") as output:
        site = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "project.asgi:application", "--port", str(backend_port)]
            + ["--log-level", "warning"],
            cwd=ROOT,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    config = nginx_config(tmp_path, port, backend_port)
    nginx = subprocess.Popen(
        [NGINX, "-p", str(tmp_path), "-c", str(config), "-g", "daemon off;"],
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "nginx.stderr").open("w"),
    )
    try:
        client = httpx2.Client(verify=str(shared_pki().ca_file), timeout=10)
        deadline = time.monotonic() + 30
        while True:
            assert site.poll() is None, log.read_text()
            assert nginx.poll() is None, (tmp_path / "nginx.stderr").read_text()
            try:
                if client.get(public + "/healthz").status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text() + (tmp_path / "error.log").read_text()
            time.sleep(0.2)
        yield public, client
        client.close()
    finally:
        nginx.terminate()
        site.terminate()
        nginx.wait(timeout=10)
        site.wait(timeout=10)


def test_a_user_signs_in_through_the_documented_nginx(behind_nginx):
    public, client = behind_nginx
    login = client.get(public + "/accounts/login/?next=/")
    assert login.status_code == 200, login.text[:300]  # secure through the proxy: not redirected
    assert "Secure" in login.headers["set-cookie"]
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    posted = client.post(
        public + "/accounts/login/?next=/",
        data={"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token, "next": "/"},
        headers={"Origin": public, "Referer": public + "/accounts/login/?next=/"},
    )
    assert posted.status_code == 302, (
        posted.status_code,
        re.findall(r'(?s)class="error.*?</', posted.text),
        posted.text[posted.text.find("<form") :][:800],
    )
    assert posted.headers["location"] == "/"
    assert "sessionid" in client.cookies
    assert client.get(public + "/").status_code == 200
    answer = client.get(public + "/.well-known/oauth-protected-resource/mcp")
    assert answer.status_code == 200, (answer.status_code, answer.headers, answer.text[:300])
    metadata = answer.json()
    assert metadata["resource"] == public + "/mcp"


def test_a_forged_cross_site_post_is_still_refused(behind_nginx):
    public, client = behind_nginx
    login = client.get(public + "/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text).group(1)
    forged = client.post(
        public + "/accounts/login/",
        data={"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token},
        headers={"Origin": "https://attacker.cimd.test", "Referer": "https://attacker.cimd.test/"},
    )
    assert forged.status_code == 403
