"""CIMD through the OAuth endpoints: first sight, caching per HTTP headers, revalidation, failures, redirect URIs.

The document server is local HTTPS with a test CA; Celery runs eagerly (the embedded default).
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
from django.utils import timezone
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.authorization_server.cimd import cache, leased_fetch
from mcp_oauth.models import ClientMetadataDocument
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.oauth_helpers import hidden_fields, pkce_pair

pytestmark = pytest.mark.django_db

REDIRECT = "http://127.0.0.1/callback"


def authorize(client, client_id, redirect_uri=REDIRECT, **extra):
    verifier, challenge = pkce_pair()
    params = {
        "response_type": "code",
        "client_id": client_id,
        "redirect_uri": redirect_uri,
        "state": "xyz",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "mcp",
        **extra,
    }
    response = client.get("/oauth/authorize?" + urlencode(params))
    response.verifier = verifier
    response.params = params
    return response


def assert_error_page(response, code):
    assert response.status_code in (400, 503), (response.status_code, response.content[:500])
    assert "Location" not in response
    html = response.content.decode()
    assert f'<strong id="error-code">{code}</strong>' in html, html[-800:]
    return html


def entry(client_id) -> ClientMetadataDocument:
    return ClientMetadataDocument.objects.get(client_id=client_id)


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


def test_metadata_advertises_cimd(client, resource):
    data = client.get("/.well-known/oauth-authorization-server").json()
    assert data["client_id_metadata_document_supported"] is True
    assert "none" in data["token_endpoint_auth_methods_supported"]


def test_first_sight_fetches_and_registers_the_client(cimd_env, logged_in, user):
    client_id = cimd_env.publish(max_age=600)
    cimd_env.server.routes["/client.json"].etag = '"v1"'
    page = authorize(logged_in, client_id)
    assert page.status_code == 200
    html = page.content.decode()
    assert "Test CIMD client" in html and 'id="client-id-host">client.cimd.test<' in html

    application = get_application_model().objects.get(client_id=client_id)
    assert application.registration_source == "cimd" and application.client_type == "public"
    assert application.redirect_uris == REDIRECT
    cached = entry(client_id)
    assert cached.application_id == application.pk
    assert cached.document["client_name"] == "Test CIMD client"
    assert cached.etag == '"v1"'
    assert cached.fetch_count == 1 and not cached.last_error and not cached.lease_token
    assert (cached.expires_at - cached.fetched_at).total_seconds() == 600
    assert application.cimd_expires_at == cached.expires_at

    # Consent, code, token: a working public client.
    form = hidden_fields(html)
    form["allow"] = "Authorize"
    done = logged_in.post("/oauth/authorize?" + urlencode(page.params), form)
    assert done.status_code in (302, 303)
    query = parse_qs(urlsplit(done["Location"]).query)
    token = logged_in.post(
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": query["code"][0],
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": page.verifier,
        },
    )
    assert token.status_code == 200, token.content
    assert get_access_token_model().objects.get(application=application).user == user
    assert len(cimd_env.server.fetches()) == 1  # the cached document served the other steps


def test_redirect_uri_not_in_the_document_gets_an_error_page(cimd_env, logged_in):
    client_id = cimd_env.publish()
    for uri in ("https://evil.example/cb", "http://127.0.0.1/callback/", "http://127.0.0.1/other"):
        assert_error_page(authorize(logged_in, client_id, redirect_uri=uri), "invalid_request")
    assert len(cimd_env.server.fetches()) == 1


def test_loopback_redirect_port_may_vary(cimd_env, logged_in):
    client_id = cimd_env.publish()
    assert authorize(logged_in, client_id, redirect_uri="http://127.0.0.1:51234/callback").status_code == 200


def test_first_fetch_time_out_is_temporarily_unavailable_at_the_token_endpoint(cimd_env, client, resource, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_FETCH_TIMEOUT_SECONDS": 0.5}
    client_id = cimd_env.url()
    cimd_env.server.serve("/client.json", body=cimd_env.document(client_id), delay=2)
    response = client.post(
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": "x" * 30,
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": "v" * 50,
        },
    )
    assert response.status_code == 503, response.content
    assert response.json()["error"] == "temporarily_unavailable"
    assert int(response["Retry-After"]) >= 1 and response["Cache-Control"] == "no-store"


def test_desktop_client_document_is_accepted(cimd_env, logged_in, user):
    """A document shaped like a major desktop client's: device grant, native, loopback redirects."""
    client_id = cimd_env.publish(
        client_name="Desktop Assistant",
        redirect_uris=["http://127.0.0.1/callback", "http://localhost/callback"],
        grant_types=["authorization_code", "refresh_token", "urn:ietf:params:oauth:grant-type:device_code"],
        application_type="native",
        logo_uri="https://client.cimd.test/logo.svg",
        client_uri="https://client.cimd.test",
        software_id="com.example.desktop",
    )
    page = authorize(logged_in, client_id, redirect_uri="http://127.0.0.1:51234/callback")
    assert page.status_code == 200, page.content[-500:]
    assert "Desktop Assistant" in page.content.decode()
    assert entry(client_id).document["grant_types"] == ["authorization_code", "refresh_token"]


def test_manually_registered_url_client_is_not_fetched(cimd_env, logged_in):
    client_id = cimd_env.url("/manual.json")
    Application = get_application_model()
    Application.objects.create(
        client_id=client_id,
        name="Manual",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris=REDIRECT,
    )
    assert authorize(logged_in, client_id).status_code == 200
    assert cimd_env.server.fetches() == [] and not ClientMetadataDocument.objects.exists()


def test_a_fetch_in_flight_elsewhere_is_waited_for_then_times_out(cimd_env, logged_in, settings):
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "CIMD_FETCH_WAIT_SECONDS": 0.2}
    client_id = cimd_env.publish()
    ClientMetadataDocument.objects.create(
        client_id=client_id, lease_token="someone-else", lease_expires_at=timezone.now() + timedelta(minutes=1)
    )
    response = authorize(logged_in, client_id)
    assert response.status_code == 503
    assert_error_page(response, "temporarily_unavailable")
    assert cimd_env.server.fetches() == []


def test_expired_lease_is_taken_over(cimd_env, logged_in):
    client_id = cimd_env.publish()
    ClientMetadataDocument.objects.create(
        client_id=client_id, lease_token="crashed", lease_expires_at=timezone.now() - timedelta(seconds=1)
    )
    assert authorize(logged_in, client_id).status_code == 200
    assert len(cimd_env.server.fetches()) == 1


def test_no_second_fetch_by_a_request_that_read_the_row_before_a_fetch_completed(cimd_env, db):
    client_id = cimd_env.publish()
    seen = ClientMetadataDocument.objects.create(client_id=client_id)
    token = cache.claim_fetch(seen)
    assert token and cache.claim_fetch(seen) is None  # the lease is held
    assert leased_fetch.perform_fetch(client_id, token) == "fetched"
    assert cache.claim_fetch(seen) is None  # lease released, but a fetch completed since `seen` was read
    assert cache.claim_fetch(ClientMetadataDocument.objects.get(client_id=client_id)) is not None
    assert len(cimd_env.server.fetches()) == 1


def test_token_endpoint_refuses_a_refused_client(cimd_env, client, resource):
    client_id = cimd_env.url()
    cimd_env.server.serve("/client.json", status=404)
    response = client.post(
        "/oauth/token",
        {
            "grant_type": "authorization_code",
            "code": "x",
            "redirect_uri": REDIRECT,
            "client_id": client_id,
            "code_verifier": "v" * 50,
        },
    )
    assert response.status_code == 400
    assert response.json()["error"] == "invalid_client"
    assert "HTTP 404" in response.json()["error_description"]


def test_trust_policy_refusal_happens_before_any_fetch(cimd_env, logged_in, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_REGISTRATION_PERMISSION_CLASSES": ()}
    client_id = cimd_env.publish()
    html = assert_error_page(authorize(logged_in, client_id), "invalid_client")
    assert "does not accept this client" in html
    assert cimd_env.server.fetches() == []


class DotStyleFetcher:
    """A fetcher written to DOT's interface only: ``fetch(client_id) -> (document, max_age)``."""

    documents: dict = {}

    def fetch(self, client_id):
        from oauth2_provider.cimd import CIMDError

        if client_id not in self.documents:
            raise CIMDError("internal detail that must not reach the user: 10.0.0.7 refused")
        return self.documents[client_id], 120


def test_a_dot_style_fetcher_can_be_plugged_in(logged_in, settings):
    settings.OAUTH2_PROVIDER = {**settings.OAUTH2_PROVIDER, "CIMD_METADATA_FETCHER": f"{__name__}.DotStyleFetcher"}
    good, bad = "https://good.example/client.json", "https://bad.example/client.json"
    DotStyleFetcher.documents = {good: {"client_id": good, "client_name": "Plugged", "redirect_uris": [REDIRECT]}}
    assert authorize(logged_in, good).status_code == 200
    cached = entry(good)
    assert (cached.expires_at - cached.fetched_at).total_seconds() == 120
    html = assert_error_page(authorize(logged_in, bad), "invalid_client")
    assert "could not be fetched" in html and "10.0.0.7" not in html


def test_no_fetch_before_the_user_has_logged_in(cimd_env, client, resource):
    client_id = cimd_env.publish()
    response = authorize(client, client_id, scope="no-such-scope")
    assert response.status_code == 302 and response["Location"].startswith("/accounts/login/")
    assert cimd_env.server.fetches() == [] and not ClientMetadataDocument.objects.exists()
