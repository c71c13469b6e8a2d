"""The security headers of every kind of browser page (mcp_oauth.shared.ui_headers): consent, error, login
(the app's and the site's), connected apps, elicitation; on pages, redirects and error answers."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.http import HttpResponse, HttpResponseRedirect
from django.test import Client, RequestFactory

from mcp_oauth.shared.ui_headers import UI_SECURITY_HEADERS, secure_ui, secure_ui_view
from tests.support.oauth_helpers import authorize_params, pkce_pair

PASSWORD = "correct horse battery"
#: Written out, not read from the module: a change to the headers must change this test.
FRAMING = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'; form-action 'self' http: https:",
    "Referrer-Policy": "same-origin",
}
#: Cache-Control of a page whose view is also wrapped in Django's ``never_cache`` (it adds to ``no-store``).
NEVER_CACHE = "no-store, max-age=0, no-cache, must-revalidate, private"


def headers_of(response) -> dict[str, str | None]:
    return {name: response.get(name) for name in [*FRAMING, "Cache-Control"]}


def expected(cache_control: str = "no-store") -> dict[str, str]:
    return {**FRAMING, "Cache-Control": cache_control}


def signed_in(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


# --- the module ---------------------------------------------------------------------------------


def test_the_header_set_is_exactly_these_four():
    assert UI_SECURITY_HEADERS == expected()


def test_secure_ui_replaces_what_was_set_and_returns_the_same_response():
    response = HttpResponse("page")
    response["X-Frame-Options"] = "SAMEORIGIN"
    response["Cache-Control"] = "max-age=3600"
    assert secure_ui(response) is response
    assert headers_of(response) == expected()


def test_secure_ui_view_covers_every_response_of_the_view():
    answers = iter([HttpResponse("page"), HttpResponseRedirect("/next"), HttpResponse(status=404)])

    @secure_ui_view
    def view(request, *args, **kwargs):
        """A view."""
        return next(answers)

    request = RequestFactory().get("/")
    assert view.__name__ == "view" and view.__doc__ == "A view."
    for status in (200, 302, 404):
        response = view(request)
        assert response.status_code == status
        assert headers_of(response) == expected()


# --- the authorization server's pages --------------------------------------------------------------


@pytest.mark.django_db
def test_consent_page(client, user, resource, public_app):
    _, challenge = pkce_pair()
    response = signed_in(user).get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    assert response.status_code == 200 and 'name="allow"' in response.content.decode()
    assert headers_of(response) == expected(NEVER_CACHE)


@pytest.mark.django_db
def test_authorization_error_page(user, resource):
    _, challenge = pkce_pair()
    params = {"client_id": "no-such-client", "response_type": "code", "code_challenge": challenge}
    response = signed_in(user).get("/oauth/authorize?" + urlencode(params))
    assert response.status_code == 400
    assert headers_of(response) == expected(NEVER_CACHE)


@pytest.mark.django_db
def test_authorization_sign_in_redirect(client, resource, public_app):
    _, challenge = pkce_pair()
    response = client.get("/oauth/authorize?" + urlencode(authorize_params(public_app, challenge)))
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert headers_of(response) == expected(NEVER_CACHE)


@pytest.mark.django_db
def test_connected_apps_page_and_its_redirects(client, user):
    page = signed_in(user).get("/oauth/connected-apps/")
    assert page.status_code == 200
    assert headers_of(page) == expected(NEVER_CACHE)
    sign_in = client.get("/oauth/connected-apps/")
    assert sign_in.status_code == 302
    assert headers_of(sign_in) == expected(NEVER_CACHE)
    revoked = signed_in(user).post("/oauth/connected-apps/", {"action": "revoke_all"})
    assert revoked.status_code == 303
    assert headers_of(revoked) == expected(NEVER_CACHE)


# --- login pages ----------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_apps_login_page_and_its_redirect(client, user):
    page = client.get("/oauth/login?" + urlencode({"next": "/oauth/authorize?client_id=x"}))
    assert page.status_code == 200
    assert headers_of(page) == expected()
    answer = client.post("/oauth/login", {"username": "alice", "password": PASSWORD, "next": "/oauth/connected-apps/"})
    assert answer.status_code == 302
    assert headers_of(answer) == expected()


@pytest.mark.django_db
def test_the_reference_sites_login_page(client):
    page = client.get("/accounts/login/?" + urlencode({"next": "/oauth/authorize?client_id=x"}))
    assert page.status_code == 200
    assert headers_of(page) == expected()


# --- elicitation pages ----------------------------------------------------------------------------


@pytest.mark.django_db
def test_elicitation_pages(client, user):
    connections = signed_in(user).get("/elicitation/connections/")
    assert connections.status_code == 200
    assert headers_of(connections) == expected()
    unknown = signed_in(user).get("/elicitation/unknown-elicitation-id/")
    assert unknown.status_code == 404
    assert headers_of(unknown) == expected()
    sign_in = client.get("/elicitation/connections/")
    assert sign_in.status_code == 302
    assert headers_of(sign_in) == expected()
