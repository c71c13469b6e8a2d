"""Where TLS terminates, for ``make serve`` (``project/serve.py``) and the settings behind it.

* :func:`project.serve.transport_problem`: behind a TLS proxy (``DJANGO_SECURE_PROXY_SSL_HEADER``,
  an https ``MCP_BASE_URL`` among ``DJANGO_ALLOWED_HOSTS``) or plain http on loopback
  (``DJANGO_INSECURE_LOOPBACK_HTTP=1``); anything else stops ``make serve`` with exit status 2
  before it creates or starts anything, naming the two ways.
* ``project/settings.py`` in a process of its own with each environment, requests through the
  whole ASGI application (lanes and middleware): behind the proxy a forwarded request is secure
  (no redirect, HSTS, Secure cookies) and one without the header is redirected once to https; a
  spoofed ``X-Forwarded-Host`` changes no URL the site announces (the issuer is ``MCP_BASE_URL``);
  with the loopback switch nothing redirects and cookies work over http; the switch is refused
  off loopback.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from project import serve

ROOT = Path(__file__).resolve().parents[2]
SITE_PREFIXES = ("DJANGO_", "MCP_", "ELICITATION_", "DATABASE_", "REDIS_", "CELERY_", "DB_", "SERVE_", "HOST", "PORT")
PROXY = {
    "MCP_BASE_URL": "https://mcp.example.com",
    "DJANGO_ALLOWED_HOSTS": "mcp.example.com",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
}
LOOPBACK = {"DJANGO_INSECURE_LOOPBACK_HTTP": "1"}


def serve_env(**env: str) -> dict[str, str]:
    """What :func:`project.serve.environment` makes of ``env`` alone (no variable of this process)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SITE_PREFIXES)}
    saved = os.environ.copy()
    os.environ.clear()
    os.environ.update({**clean, **env})
    try:
        return serve.environment()
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.mark.parametrize(
    "env",
    [
        PROXY,
        {**PROXY, "HOST": "10.0.0.5"},  # the proxy on another machine
        {**PROXY, "DJANGO_ALLOWED_HOSTS": "mcp.example.com,.internal.example"},
        LOOPBACK,
        {**LOOPBACK, "HOST": "::1", "PORT": "8123"},
        {**LOOPBACK, "MCP_BASE_URL": "http://localhost:8000", "DJANGO_ALLOWED_HOSTS": "localhost"},
        {**LOOPBACK, "SERVE_DEMO_SUPERUSER": "1"},
        {"DJANGO_DEBUG": "1"},
    ],
)
def test_a_working_transport_has_no_problem(env):
    assert serve.transport_problem(serve_env(**env)) is None


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "Without DEBUG every http request is redirected to https, and nothing here serves https."),
        ({"MCP_BASE_URL": "https://mcp.example.com", "DJANGO_ALLOWED_HOSTS": "mcp.example.com"}, "nothing here"),
        ({**PROXY, "MCP_BASE_URL": "http://mcp.example.com"}, "MCP_BASE_URL must be the https URL clients use"),
        ({**PROXY, "DJANGO_ALLOWED_HOSTS": "other.example.com"}, "does not name the host of MCP_BASE_URL"),
        ({**LOOPBACK, "HOST": "0.0.0.0"}, "not with HOST=0.0.0.0, MCP_BASE_URL=http://0.0.0.0:8000."),
        ({**LOOPBACK, "MCP_BASE_URL": "http://mcp.example.com"}, "not with MCP_BASE_URL=http://mcp.example.com"),
        ({**LOOPBACK, "DJANGO_ALLOWED_HOSTS": "127.0.0.1,*"}, "not with DJANGO_ALLOWED_HOSTS names *."),
        ({**LOOPBACK, **PROXY}, "are both set"),
        ({**PROXY, "SERVE_DEMO_SUPERUSER": "1"}, "SERVE_DEMO_SUPERUSER=1 (a superuser with the demo password)"),
    ],
)
def test_a_broken_transport_is_named(env, says):
    problem = serve.transport_problem(serve_env(**env))
    assert problem is not None and says in problem, problem


def test_make_serve_stops_before_anything_and_names_the_two_ways(tmp_path):
    """No switch, no proxy header: exit status 2 before the database is touched (it points nowhere)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SITE_PREFIXES)}
    result = subprocess.run(
        [sys.executable, "-m", "project.serve"],
        cwd=ROOT,
        env={**clean, "DATABASE_URL": "postgres://nobody@127.0.0.1:1/nowhere", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stdout == ""
    assert "DJANGO_SECURE_PROXY_SSL_HEADER=HTTP_X_FORWARDED_PROTO" in result.stderr
    assert "DJANGO_INSECURE_LOOPBACK_HTTP=1" in result.stderr
    assert "Traceback" not in result.stderr


# --- the settings, in a process of their own --------------------------------------------------

PROBE = """
import json, django
django.setup()
from django.conf import settings
from django.core.management import call_command
call_command("migrate", verbosity=0)
from project.asgi import application
from tests.support.asgi_client import asgi_call
out = {"settings": {name: getattr(settings, name, None) for name in (
    "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SESSION_COOKIE_SECURE", "CSRF_COOKIE_SECURE",
    "SECURE_PROXY_SSL_HEADER", "USE_X_FORWARDED_HOST")}}
for name, method, path, headers in json.loads(REQUESTS):
    status, response_headers, body = asgi_call(application, method, path, headers)
    out[name] = {"status": status, "location": response_headers.get("location"),
                 "hsts": response_headers.get("strict-transport-security"),
                 "cookie": response_headers.get("set-cookie"),
                 "json": json.loads(body) if response_headers.get("content-type", "").startswith("application/json") else None}
print(json.dumps(out))
"""


def probe(env: dict[str, str], requests: list[tuple[str, str, str, dict]], tmp_path) -> dict:
    """The settings and the answers of ``project.asgi.application`` to ``requests`` under ``env``
    (production: DEBUG off, secrets set, a migrated SQLite file of its own)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SITE_PREFIXES)}
    full = {
        **clean,
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "serve-transport-test-" + "k" * 40,
        "ELICITATION_ENCRYPTION_KEYS": "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8=",
        "MCP_REQUEST_STATE_KEYS": "serve-transport-test-request-state-key-0123456789",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'site.sqlite3'}",
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        **env,
    }
    code = PROBE.replace("REQUESTS", repr(json.dumps(requests)))
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=full, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_behind_the_proxy_a_forwarded_request_is_secure_and_nothing_loops(tmp_path):
    host = {"host": "mcp.example.com"}
    forwarded = {**host, "x-forwarded-proto": "https"}
    spoofed = {**forwarded, "x-forwarded-host": "evil.example", "x-forwarded-port": "8443"}
    token = {**forwarded, "content-type": "application/x-www-form-urlencoded"}
    seen = probe(
        PROXY,
        [
            ("direct", "GET", "/accounts/login/", host),
            ("forwarded", "GET", "/accounts/login/", forwarded),
            ("token direct", "POST", "/oauth/token", {**host, "content-type": "application/x-www-form-urlencoded"}),
            ("token forwarded", "POST", "/oauth/token", token),
            ("metadata spoofed", "GET", "/.well-known/oauth-authorization-server", spoofed),
            ("resource spoofed", "GET", "/.well-known/oauth-protected-resource/mcp", spoofed),
            ("other host", "GET", "/accounts/login/", {"host": "evil.example", "x-forwarded-proto": "https"}),
        ],
        tmp_path,
    )
    assert seen["settings"] == {
        "SECURE_SSL_REDIRECT": True,
        "SECURE_HSTS_SECONDS": 31536000,
        "SESSION_COOKIE_SECURE": True,
        "CSRF_COOKIE_SECURE": True,
        "SECURE_PROXY_SSL_HEADER": ["HTTP_X_FORWARDED_PROTO", "https"],
        "USE_X_FORWARDED_HOST": False,
    }
    # Not through the proxy: one redirect to the https URL, which the proxy then forwards as secure.
    assert (seen["direct"]["status"], seen["direct"]["location"]) == (301, "https://mcp.example.com/accounts/login/")
    assert seen["forwarded"]["status"] == 200 and seen["forwarded"]["location"] is None
    assert seen["forwarded"]["hsts"] == "max-age=31536000; includeSubDomains; preload"
    assert "; Secure" in seen["forwarded"]["cookie"] and seen["forwarded"]["cookie"].startswith("csrftoken=")
    assert (seen["token direct"]["status"], seen["token direct"]["location"]) == (
        301,
        "https://mcp.example.com/oauth/token",
    )
    assert seen["token forwarded"]["status"] == 400 and seen["token forwarded"]["json"]["error"] == "invalid_request"
    # The issuer and the resource come from MCP_BASE_URL, whatever X-Forwarded-Host says.
    assert seen["metadata spoofed"]["status"] == 200
    metadata = seen["metadata spoofed"]["json"]
    assert metadata["issuer"] == "https://mcp.example.com"
    assert metadata["token_endpoint"] == "https://mcp.example.com/oauth/token"
    assert "evil.example" not in json.dumps(metadata)
    assert seen["resource spoofed"]["json"]["resource"] == "https://mcp.example.com/mcp"
    assert seen["resource spoofed"]["json"]["authorization_servers"] == ["https://mcp.example.com"]
    assert seen["other host"]["status"] == 400


def test_the_loopback_switch_serves_http_without_redirect_hsts_or_secure_cookies(tmp_path):
    host = {"host": "127.0.0.1:8000"}
    seen = probe(
        {**LOOPBACK, "MCP_BASE_URL": "http://127.0.0.1:8000"},
        [
            ("login", "GET", "/accounts/login/", host),
            ("metadata", "GET", "/.well-known/oauth-authorization-server", host),
            ("other host", "GET", "/accounts/login/", {"host": "mcp.example.com"}),
        ],
        tmp_path,
    )
    assert seen["settings"] == {
        "SECURE_SSL_REDIRECT": False,
        "SECURE_HSTS_SECONDS": 0,
        "SESSION_COOKIE_SECURE": False,
        "CSRF_COOKIE_SECURE": False,
        "SECURE_PROXY_SSL_HEADER": None,
        "USE_X_FORWARDED_HOST": False,
    }
    login = seen["login"]
    assert (login["status"], login["location"], login["hsts"]) == (200, None, None)
    assert login["cookie"].startswith("csrftoken=") and "Secure" not in login["cookie"]
    assert seen["metadata"]["json"]["issuer"] == "http://127.0.0.1:8000"
    assert seen["other host"]["status"] == 400


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"MCP_BASE_URL": "https://mcp.example.com"}, "MCP_BASE_URL=https://mcp.example.com is not loopback"),
        ({"DJANGO_ALLOWED_HOSTS": "127.0.0.1,mcp.example.com"}, "DJANGO_ALLOWED_HOSTS names mcp.example.com."),
    ],
)
def test_the_settings_refuse_the_loopback_switch_off_loopback(env, says):
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SITE_PREFIXES)}
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env={**clean, **LOOPBACK, "DJANGO_DEBUG": "0", **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert (
        "django.core.exceptions.ImproperlyConfigured: DJANGO_INSECURE_LOOPBACK_HTTP=1 serves plain http"
        in result.stderr
    )
    assert says in result.stderr


def test_check_deploy_reports_exactly_what_the_loopback_switch_turns_off():
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SITE_PREFIXES)}
    env = {
        **clean,
        **LOOPBACK,
        "DJANGO_DEBUG": "0",
        "DJANGO_SECRET_KEY": "serve-transport-test-" + "k" * 40,
        "ELICITATION_ENCRYPTION_KEYS": "X92QSNoDmtPFsChL9dqwHiIybErPh6w6IMjIOw9LYJ8=",
        "MCP_REQUEST_STATE_KEYS": "serve-transport-test-request-state-key-0123456789",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    ids = re.findall(r"^\?: \(([a-z_]+\.[A-Z]\d+)\)", result.stderr, flags=re.MULTILINE)
    assert ids == ["security.W004", "security.W008", "security.W012", "security.W016"], result.stderr


def test_the_banner_names_the_database_an_administrator_is_created_in():
    env = {"MCP_BASE_URL": "http://127.0.0.1:8000", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"}
    shown = serve.banner({**env, "DATABASE_URL": "postgres://postgres@127.0.0.1:5432/mcp_authz"})
    assert "DATABASE_URL=postgres://postgres@127.0.0.1:5432/mcp_authz " in shown
    assert "manage.py createsuperuser" in shown
    # a password is never printed
    secret = serve.banner({**env, "DATABASE_URL": "postgres://app:s3cret@db.internal:5432/mcp"})
    assert "s3cret" not in secret
    assert "DATABASE_URL=<the DATABASE_URL of make serve>" in secret


def test_the_banner_command_runs_manage_py_with_the_sites_redis():
    """Without REDIS_URL the copied createsuperuser ran with a cache of its own and warned W071."""
    env = {"MCP_BASE_URL": "http://127.0.0.1:8000", "CELERY_BROKER_URL": "redis://127.0.0.1:6379/0"}
    database = "postgres://postgres@127.0.0.1:5432/mcp_authz"
    shown = serve.banner({**env, "DATABASE_URL": database, "REDIS_URL": "redis://127.0.0.1:6379/10"})
    assert f"DATABASE_URL={database} REDIS_URL=redis://127.0.0.1:6379/10 " in shown
    secret = serve.banner({**env, "DATABASE_URL": database, "REDIS_URL": "redis://:pw1234@cache.internal:6379/0"})
    assert "pw1234" not in secret
    assert "REDIS_URL=<the REDIS_URL of make serve>" in secret
