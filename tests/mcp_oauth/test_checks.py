"""`manage.py check --deploy` on a production configuration, and the redirect-scheme rule behind it.

The production configuration is the one the documentation page "Run in production behind TLS"
(``docs/how-to/production.md``) documents: the test reads the variables its environment table marks **required** and runs ``check --deploy --fail-level WARNING``
with exactly those (and nothing else of the site's).

RFC 9700 §2.1 wants https redirect URIs except the loopback ones of native apps (RFC 8252 §7.3).
DOT can only keep ``http`` for every host or for none; the app keeps it for loopback hosts and
refuses it everywhere else, and its deploy check says so instead of DOT's ``E003``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import pytest
from cryptography.fernet import Fernet
from django.core.checks import run_checks
from django.core.checks.registry import registry
from oauth2_provider.models import get_application_model

from tests.support.oauth_helpers import authorize_params, pkce_pair

ROOT = Path(__file__).resolve().parents[2]
SITE_PREFIXES = ("DJANGO_", "MCP_", "ELICITATION_", "DATABASE_", "REDIS_", "CELERY_", "DB_")

#: A value for each variable the production page marks required (the test checks the two agree).
PRODUCTION_ENV = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": "k7#Qp2!vX9zL4mR8wT1yB6nC3dF5gH0jK2lM4nP6qR8sT0uV2wX4yZ6aB8cD0eF2",
    "MCP_BASE_URL": "https://mcp.example.com",
    "DJANGO_ALLOWED_HOSTS": "mcp.example.com",
    "DJANGO_SECURE_PROXY_SSL_HEADER": "HTTP_X_FORWARDED_PROTO",
    "DATABASE_URL": "postgres://mcp@db.internal:5432/mcp_authz",
    "REDIS_URL": "redis://redis.internal:6379/0",
    "CELERY_BROKER_URL": "redis://redis.internal:6379/0",
    "ELICITATION_ENCRYPTION_KEYS": Fernet.generate_key().decode(),
    "MCP_REQUEST_STATE_KEYS": "request-state-key-for-the-deploy-check-0123456789",
}


PRODUCTION_PAGE = ROOT / "docs" / "how-to" / "production.md"


def documented_environment_table() -> dict[str, str]:
    """``{variable: "required or default" cell}`` of the table under "## Environment" in the production page."""
    text = PRODUCTION_PAGE.read_text()
    start = text.index("\n## Environment\n")
    end = text.find("\n## ", start + 5)
    section = text[start : end if end != -1 else len(text)]
    header = section.index("| variable | required or default | meaning |")
    rows: dict[str, str] = {}
    for line in section[header:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        names = re.findall(r"`([A-Z][A-Z0-9_]+)`", cells[0])
        assert names, line
        for name in names:
            rows[name] = cells[1]
    return rows


def documented_production_env() -> dict[str, str]:
    required = {name for name, cell in documented_environment_table().items() if cell.startswith("**required**")}
    assert required == set(PRODUCTION_ENV), (sorted(required), sorted(PRODUCTION_ENV))
    return {name: PRODUCTION_ENV[name] for name in sorted(required)}


def manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(SITE_PREFIXES)}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_docs_document_every_variable_they_name_and_the_site_reads_them():
    table = documented_environment_table()
    assert len(table) >= len(PRODUCTION_ENV)
    sources = "".join((ROOT / "project" / name).read_text() for name in ("settings.py", "serve.py"))
    assert [name for name in table if f'"{name}"' not in sources] == []


def test_check_deploy_is_clean_with_the_documented_production_settings():
    result = manage("check", "--deploy", "--fail-level", "WARNING", **documented_production_env())
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == "System check identified no issues (0 silenced).\n"
    assert result.stderr == ""


@pytest.mark.parametrize(
    ("left_out", "reported"),
    [
        ("DJANGO_DEBUG", "security.W018"),
        ("DJANGO_SECRET_KEY", "security.W009"),
        ("ELICITATION_ENCRYPTION_KEYS", "elicitation.W001"),
        ("MCP_REQUEST_STATE_KEYS", "mcp_oauth.W060"),
    ],
)
def test_check_deploy_reports_a_documented_secret_or_switch_left_out(left_out, reported):
    env = {k: v for k, v in documented_production_env().items() if k != left_out}
    result = manage("check", "--deploy", "--fail-level", "WARNING", **env)
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"({reported})" in result.stderr


def test_check_deploy_still_warns_about_a_weaker_production_site():
    env = {**PRODUCTION_ENV, "MCP_BASE_URL": "http://mcp.example.com", "ELICITATION_ENCRYPTION_KEYS": ""}
    result = manage("check", "--deploy", **env)
    assert result.returncode == 0, result.stdout + result.stderr  # warnings, no errors
    assert "(mcp_oauth.W002)" in result.stderr
    assert "(elicitation.W001)" in result.stderr
    assert "oauth2_provider.E003" not in result.stderr


def test_the_docs_name_the_client_secret_hasher_check_by_its_id(settings):
    """The check that fires when ``ClientSecretHasher`` is left out of ``PASSWORD_HASHERS`` is the one the production page names."""
    from mcp_oauth.checks import check_fast_client_secret_hasher

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    fired = [message.id for message in check_fast_client_secret_hasher(None)]
    assert fired == ["mcp_oauth.W051"]
    text = PRODUCTION_PAGE.read_text()
    named = re.findall(
        r"`mcp_oauth\.authorization_server\.client_auth\.client_secrets\.ClientSecretHasher` in `PASSWORD_HASHERS` \(check `([^`]+)`\)",
        text,
    )
    assert named == fired


def deploy_ids() -> list[str]:
    return [message.id for message in run_checks(include_deployment_checks=True)]


def test_dot_check_is_replaced_not_duplicated():
    from oauth2_provider.checks import validate_bcp_configuration

    from mcp_oauth.checks import dot_bcp_configuration

    assert validate_bcp_configuration not in registry.deployment_checks
    assert dot_bcp_configuration in registry.deployment_checks


def test_other_dot_bcp_messages_are_still_reported(settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "ALLOW_URI_WILDCARDS": True}
    ids = deploy_ids()
    assert "oauth2_provider.E004" in ids  # wildcard redirect URIs with the matching gate on
    assert "mcp_oauth.W010" in ids
    assert "oauth2_provider.E003" not in ids


def test_dot_redirect_scheme_error_comes_back_without_the_loopback_rule(settings):
    settings.OAUTH2_PROVIDER = {
        **settings.OAUTH2_PROVIDER,
        "OAUTH2_VALIDATOR_CLASS": "oauth2_provider.oauth2_validators.OAuth2Validator",
    }
    ids = deploy_ids()
    assert "oauth2_provider.E003" in ids
    assert "mcp_oauth.W010" in ids


def test_leaving_http_out_of_the_schemes_warns_that_desktop_clients_break(settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "ALLOWED_REDIRECT_URI_SCHEMES": ["https"]}
    assert "mcp_oauth.W013" in deploy_ids()


@pytest.mark.parametrize(
    ("uri", "allowed"),
    [
        ("https://client.example.com/cb", True),
        ("http://127.0.0.1/callback", True),
        ("http://127.0.0.1:53682/callback", True),
        ("http://localhost:8080/cb", True),
        ("http://[::1]:9000/cb", True),
        ("http://client.example.com/cb", False),
        ("http://10.0.0.5/cb", False),
        ("http://127.0.0.1.nip.io/cb", False),
        ("http://localhost.evil.example/cb", False),
        ("javascript:alert(1)", False),
        ("http://[::1/cb", False),
    ],
)
def test_redirect_scheme_rule(uri, allowed):
    from mcp_oauth.shared.redirect_uris import redirect_scheme_allowed

    assert redirect_scheme_allowed(uri) is allowed


@pytest.mark.django_db
def test_http_redirect_off_loopback_is_refused_at_the_authorization_endpoint(client, user, resource):
    """A client registered some other way (admin, DOT's command) with an http redirect URI on a
    public host never receives a code there: error page, no redirect."""
    Application = get_application_model()
    app = Application.objects.create(
        name="Legacy",
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris="http://client.example.com/cb",
    )
    client.force_login(user)
    _, challenge = pkce_pair()
    params = authorize_params(app, challenge, redirect_uri="http://client.example.com/cb")
    response = client.get("/oauth/authorize?" + urlencode(params))
    assert response.status_code == 400
    assert "Location" not in response
    assert b"client.example.com/cb?code=" not in response.content


@pytest.mark.django_db
def test_loopback_http_redirect_is_still_authorized(client, user, resource, public_app):
    client.force_login(user)
    _, challenge = pkce_pair()
    params = authorize_params(public_app, challenge, redirect_uri="http://127.0.0.1:61234/callback")
    page = client.get("/oauth/authorize?" + urlencode(params))
    assert page.status_code == 200
    assert b'name="allow"' in page.content


@pytest.mark.django_db
def test_admin_form_refuses_http_redirect_uris_off_loopback(admin_client):
    def add(redirect_uris: str):
        return admin_client.post(
            "/admin/oauth2_provider/application/add/",
            {
                "name": "Form client",
                "client_id": "form-client-" + redirect_uris[-3:],
                "client_type": "public",
                "authorization_grant_type": "authorization-code",
                "redirect_uris": redirect_uris,
                "post_logout_redirect_uris": "",
                "allowed_origins": "",
                "algorithm": "",
                "mcp_profile-TOTAL_FORMS": "0",
                "mcp_profile-INITIAL_FORMS": "0",
                "mcp_profile-MIN_NUM_FORMS": "0",
                "mcp_profile-MAX_NUM_FORMS": "1",
            },
        )

    refused = add("https://ok.example/cb http://client.example.com/cb")
    assert refused.status_code == 200
    assert "Redirect URIs must use https, or http on a loopback host" in refused.content.decode()
    assert "http://client.example.com/cb" in refused.content.decode()
    assert not get_application_model().objects.filter(name="Form client").exists()

    accepted = add("https://ok.example/cb http://127.0.0.1/callback")
    assert accepted.status_code == 302, accepted.content.decode()[:2000]
    assert get_application_model().objects.get(name="Form client").redirect_uris == (
        "https://ok.example/cb http://127.0.0.1/callback"
    )


@pytest.mark.django_db
def test_e140_a_host_whose_secrets_do_not_fit_the_fleets_with_deploy_and_database(settings):
    """The fleet check as a deploy check of the database (compared, nothing recorded)."""
    from mcp_oauth.management.fleet import check_fleet_config
    from mcp_oauth.models import FleetSecret

    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    check_fleet_config(host="host-a")
    recorded = list(FleetSecret.objects.values_list("setting", "fingerprints"))

    def e140(**options):
        return [m for m in run_checks(include_deployment_checks=True, **options) if m.id == "mcp_oauth.E140"]

    assert e140(databases=["default"]) == []
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    assert e140() == []  # not a database check run: nothing read
    (error,) = e140(databases=["default"])
    assert error.msg.startswith('ELICITATION["ENCRYPTION_KEYS"]: no key of this host')
    assert "check_fleet_config --replace" in error.hint
    assert list(FleetSecret.objects.values_list("setting", "fingerprints")) == recorded
