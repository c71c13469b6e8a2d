"""Adoption defaults: where users sign in, the app's own login page, its check; tools modules; tasks without Celery."""

from __future__ import annotations

from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.core.checks import run_checks
from django.urls import reverse

from mcp_oauth.authorization_server.pages.login import login_url
from tests.support.oauth_helpers import authorize_params, pkce_pair


def ids(**kwargs) -> list[str]:
    return [message.id for message in run_checks(**kwargs)]


@pytest.fixture
def minimal_site(settings):
    """A site with no login page: LOGIN_URL is Django's default and nothing routes it."""
    settings.ROOT_URLCONF = "tests.support.urls_minimal"
    settings.LOGIN_URL = "/accounts/login/"


# --- where users sign in ------------------------------------------------------------------------


def test_the_sites_routed_login_url_is_used():
    assert login_url() == "/accounts/login/"  # the reference site routes it


def test_a_site_without_a_login_page_gets_the_apps_own(minimal_site):
    assert login_url() == "/oauth/login"
    assert "mcp_oauth.W030" not in ids()
    assert "mcp_oauth.E031" not in ids()


def test_a_login_url_the_site_chose_is_kept_even_unrouted(minimal_site, settings):
    settings.LOGIN_URL = "/members/sign-in/"
    assert login_url() == "/members/sign-in/"
    assert "mcp_oauth.W030" in ids()


def test_a_login_url_on_another_host_is_kept(minimal_site, settings):
    settings.LOGIN_URL = "https://sso.example.com/login"
    assert login_url() == "https://sso.example.com/login"
    assert "mcp_oauth.W030" not in ids()


def test_the_apps_login_url_setting_wins(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "LOGIN_URL": "mcp-oauth-login"}
    assert login_url() == "/oauth/login"


@pytest.mark.django_db
def test_signed_out_authorization_goes_to_the_apps_login_page(client, minimal_site, resource, public_app):
    _, challenge = pkce_pair()
    query = urlencode(authorize_params(public_app, challenge))
    response = client.get("/oauth/authorize?" + query)
    assert response.status_code == 302
    location = urlsplit(response["Location"])
    assert location.path == "/oauth/login"
    assert parse_qs(location.query)["next"] == ["/oauth/authorize?" + query]


@pytest.mark.django_db
def test_signed_out_elicitation_pages_go_to_the_apps_login_page(client, minimal_site):
    response = client.get("/elicitation/connections/")
    assert (response.status_code, response["Location"]) == (302, "/oauth/login?next=/elicitation/connections/")


# --- the app's login page -----------------------------------------------------------------------


@pytest.mark.django_db
def test_login_page_names_the_client_and_cannot_be_framed(client, minimal_site, public_app):
    next_url = "/oauth/authorize?" + urlencode({"client_id": public_app.client_id, "response_type": "code"})
    page = client.get("/oauth/login?" + urlencode({"next": next_url}))
    assert page.status_code == 200
    assert page["X-Frame-Options"] == "DENY"
    assert "frame-ancestors 'none'" in page["Content-Security-Policy"]
    assert page["Cache-Control"].startswith("no-store") or "no-store" in page["Cache-Control"]
    html = page.content.decode()
    assert "Sign in to testserver" in html
    assert '<strong id="login-client">Test client</strong>\n  wants to use <strong id="login-site">' in html
    assert f'name="next" value="{next_url.replace("&", "&amp;")}"' in html


@pytest.mark.django_db
def test_login_page_ignores_a_client_id_outside_an_authorization_request(client, minimal_site, public_app):
    page = client.get("/oauth/login?" + urlencode({"next": f"/elsewhere?client_id={public_app.client_id}"}))
    assert 'id="login-client"' not in page.content.decode()


@pytest.mark.django_db
def test_signing_in_returns_to_the_authorization_request(client, minimal_site, user, public_app):
    next_url = "/oauth/authorize?" + urlencode({"client_id": public_app.client_id})
    response = client.post("/oauth/login", {"username": "alice", "password": "correct horse battery", "next": next_url})
    assert response.status_code == 302
    assert response["Location"] == next_url
    assert response["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
def test_signing_in_never_leaves_for_another_site(client, minimal_site, user):
    response = client.post(
        "/oauth/login", {"username": "alice", "password": "correct horse battery", "next": "https://evil.example/x"}
    )
    assert response.status_code == 302
    assert response["Location"] == "/oauth/login"
    done = client.get("/oauth/login").content.decode()
    assert "You are signed in as <strong>alice</strong>" in done
    assert "<form" not in done  # no second sign-in form under "you are signed in"
    assert 'href="/oauth/connected-apps/"' in done


@pytest.mark.django_db
def test_a_wrong_password_is_refused_on_the_page(client, minimal_site, user):
    response = client.post("/oauth/login", {"username": "alice", "password": "wrong", "next": "/oauth/authorize"})
    assert response.status_code == 200
    assert "Your user name and password didn't match." in response.content.decode()
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_the_login_form_is_csrf_protected(minimal_site, user):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    response = strict.post("/oauth/login", {"username": "alice", "password": "correct horse battery"})
    assert response.status_code == 403


# --- the check that renders the login page ------------------------------------------------------


def test_a_login_page_that_cannot_render_is_an_error(settings, tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "login.html").write_text('{% extends "base-the-site-does-not-have.html" %}')
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path]}]
    settings.ROOT_URLCONF = "tests.support.urls_broken_login"
    messages = [message for message in run_checks() if message.id == "mcp_oauth.E031"]
    assert len(messages) == 1
    assert messages[0].msg == (
        "The login page '/accounts/login/' cannot render its template 'broken/login.html': "
        "TemplateDoesNotExist: base-the-site-does-not-have.html"
    )


def test_a_login_page_that_renders_passes(settings, tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "login.html").write_text(
        '{% extends "mcp_oauth/base.html" %}{% block content %}{{ form }}{% endblock %}'
    )
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path]}]
    settings.ROOT_URLCONF = "tests.support.urls_broken_login"
    assert "mcp_oauth.E031" not in ids()


def test_the_reference_sites_decorated_login_view_is_rendered_by_the_check(settings, tmp_path):
    """project/urls.py wraps LoginView (not frameable); the check sees through the wrapper."""
    (tmp_path / "registration").mkdir()
    (tmp_path / "registration" / "login.html").write_text("{% url 'no-such-url-name' %}")
    settings.TEMPLATES = [{**settings.TEMPLATES[0], "DIRS": [tmp_path]}]
    assert "mcp_oauth.E031" in ids()


def test_the_login_view_is_the_one_named_in_the_urls():
    assert reverse("mcp-oauth-login") == "/oauth/login"


# --- tools modules ------------------------------------------------------------------------------


def test_a_missing_tool_module_is_reported(settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOOL_MODULES": ["project.no_such_tools"]}
    messages = [message for message in run_checks() if message.id == "mcp_oauth.W021"]
    assert [message.msg for message in messages] == [
        "MCP_OAUTH[\"TOOL_MODULES\"] names 'project.no_such_tools', which does not exist: its tools are not served."
    ]
