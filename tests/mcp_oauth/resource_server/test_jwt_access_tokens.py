"""JWT access tokens (RFC 9068) end to end on the site: issued by the token endpoint for a resource
that opted in, published keys, verified by the resource server without a query, revoked through
the deny-list, rotated with overlap."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import timedelta

import pytest
from django.db import connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.authorization_server.tokens.grants import revoke_user_grants
from mcp_oauth.models import AccessTokenSigningKey, ProtectedResource
from mcp_oauth.resource_server.authentication import BearerChallenge, authenticate_bearer
from mcp_oauth.resource_server.jwt_keys import key_ring
from mcp_oauth.shared.access_jwt import KeySet, verify_access_token
from tests.support.oauth_helpers import bearer_status, bearer_works, first_pair

pytestmark = pytest.mark.django_db

RESOURCE = "http://testserver/mcp"


def segments(token: str) -> tuple[dict, dict]:
    head, body, _ = token.split(".")
    decode = lambda part: json.loads(base64.urlsafe_b64decode(part + "=" * (-len(part) % 4)))  # noqa: E731
    return decode(head), decode(body)


@pytest.fixture
def jwt_resource(resource):
    resource.jwt_access_tokens = True
    resource.save()
    signing_keys.rotate()
    return resource


@pytest.fixture
def logged_in(client, user):
    client.force_login(user)
    return client


def test_a_jwt_resource_gets_an_rfc9068_token_and_the_row_is_written(logged_in, jwt_resource, user, public_app):
    pair = first_pair(logged_in, public_app)
    token = pair["access_token"]
    header, claims = segments(token)
    key = AccessTokenSigningKey.objects.get()
    assert header == {"alg": "ES256", "typ": "at+jwt", "kid": key.kid}
    assert claims["iss"] == "http://testserver"
    assert claims["sub"] == str(user.pk)
    assert claims["aud"] == RESOURCE
    assert claims["client_id"] == public_app.client_id
    assert claims["scope"] == "mcp"
    assert claims["exp"] - claims["iat"] == pair["expires_in"] == 3600
    assert len(claims["jti"]) >= 20
    assert "cnf" not in claims and "act" not in claims and "organization" not in claims
    row = get_access_token_model().objects.get()
    assert row.token_checksum == hashlib.sha256(token.encode()).hexdigest()
    assert bearer_works(logged_in, token)


def test_an_opaque_resource_keeps_opaque_tokens(logged_in, resource, public_app):
    signing_keys.rotate()
    token = first_pair(logged_in, public_app)["access_token"]
    assert token.count(".") == 0 and len(token) == 43


def test_the_jwks_and_metadata_publish_the_key(client, jwt_resource):
    metadata = client.get("/.well-known/oauth-authorization-server").json()
    assert metadata["jwks_uri"] == "http://testserver/oauth/jwks"
    response = client.get("/oauth/jwks")
    assert response.status_code == 200
    assert response["Cache-Control"] == "public, max-age=300"
    (jwk,) = response.json()["keys"]
    key = AccessTokenSigningKey.objects.get()
    assert jwk["kid"] == key.kid and jwk["kty"] == "EC" and jwk["crv"] == "P-256" and jwk["use"] == "sig"
    assert "d" not in jwk
    assert client.post("/oauth/jwks").status_code == 405


def test_a_token_verifies_with_the_published_jwks_alone(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    keys = KeySet.from_jwks(logged_in.get("/oauth/jwks").content)
    claims = verify_access_token(token, keys=keys, issuer="http://testserver", audience=RESOURCE)
    assert claims.client_id == public_app.client_id


def test_the_resource_server_reads_no_database(logged_in, jwt_resource, public_app, user):
    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)  # warms the key ring, the client and the registry
    resource = ProtectedResource.objects.get(uri=RESOURCE)
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    with CaptureQueriesContext(connection) as queries:
        principal = authenticate_bearer(request, resource)
        assert principal.user.pk == user.pk
        assert principal.client_id == public_app.client_id
        assert principal.scopes == frozenset({"mcp"})
    assert [query["sql"] for query in queries.captured_queries] == []


@pytest.mark.parametrize("how", ["rfc7009", "connected_apps", "admin_delete", "deactivate", "delete_user"])
def test_a_revoked_token_is_refused_through_the_deny_list(logged_in, jwt_resource, public_app, user, how):
    pair = first_pair(logged_in, public_app)
    token = pair["access_token"]
    assert bearer_works(logged_in, token)
    if how == "rfc7009":
        response = logged_in.post("/oauth/revoke", {"token": token, "client_id": public_app.client_id})
        assert response.status_code == 200
    elif how == "connected_apps":
        revoke_user_grants(user, public_app, reason="user_disconnected")
    elif how == "admin_delete":
        get_access_token_model().objects.all().delete()
    elif how == "deactivate":
        user.is_active = False
        user.save()
    else:
        user.delete()
    assert get_access_token_model().objects.filter(user_id=user.pk).count() in (0, 1)
    assert bearer_status(logged_in, token) == 401


def test_rotation_publishes_before_signing_and_retires_after_the_longest_lifetime(jwt_resource):
    first = AccessTokenSigningKey.objects.get()
    now = timezone.now()
    created, retiring = signing_keys.rotate(publish_seconds=600, now=now)
    assert [key.kid for key in retiring] == [first.kid]
    assert created.signs_from == now + timedelta(seconds=600)
    first.refresh_from_db()
    assert first.retire_at == now + timedelta(seconds=600 + 3600)
    ring = key_ring()
    assert {jwk["kid"] for jwk in ring.jwks()["keys"]} == {first.kid, created.kid}
    assert ring.signing_key(now).kid == first.kid  # the new key is published, not signing yet
    assert ring.signing_key(now + timedelta(seconds=601)).kid == created.kid
    assert signing_keys.prune(now + timedelta(seconds=600 + 3601)) == 1
    assert list(AccessTokenSigningKey.objects.values_list("kid", flat=True)) == [created.kid]


def test_a_token_of_the_previous_key_verifies_during_the_overlap(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    signing_keys.rotate(publish_seconds=0)
    newer = first_pair(logged_in, public_app)["access_token"]
    assert segments(token)[0]["kid"] != segments(newer)[0]["kid"]
    assert bearer_works(logged_in, token) and bearer_works(logged_in, newer)
    AccessTokenSigningKey.objects.filter(kid=segments(token)[0]["kid"]).update(retire_at=timezone.now())
    signing_keys_changed()
    assert bearer_status(logged_in, token) == 401
    assert bearer_works(logged_in, newer)


def signing_keys_changed():
    from mcp_oauth.resource_server.jwt_keys import bump_keys_generation

    bump_keys_generation()  # a bulk update() sends no signal


def test_the_private_key_is_encrypted_at_rest(jwt_resource, settings):
    key = AccessTokenSigningKey.objects.get()
    assert "PRIVATE KEY" not in key.private_key
    assert b"PRIVATE KEY" in signing_keys.decrypt_private_key(key.private_key)


def test_no_signing_key_issues_an_opaque_token(logged_in, resource, public_app, caplog):
    resource.jwt_access_tokens = True
    resource.save()
    token = first_pair(logged_in, public_app)["access_token"]
    assert "." not in token
    assert bearer_works(logged_in, token)
    assert "no access-token signing key" in caplog.text


@pytest.mark.urls("tests.support.urls")
def test_the_decorator_and_the_drf_class_accept_a_jwt(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    response = logged_in.get("/api/plain", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200
    assert response.json() == {"user": "alice", "client": public_app.client_id}
    response = logged_in.get("/api/notes", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 403  # a valid token without the scope "profile"
    assert 'error="insufficient_scope"' in response["WWW-Authenticate"]
    head, body, signature = token.split(".")
    response = logged_in.get("/api/notes", HTTP_AUTHORIZATION=f"Bearer {head}.{body}.{signature[::-1]}")
    assert response.status_code == 401


def test_an_organization_token_names_it_and_membership_loss_denies_it(client, user, public_app, jwt_resource):
    from mcp_oauth.models import OrganizationMembership
    from tests.support.oauth_helpers import token_request
    from tests.support.organization_helpers import add_member, code_for, make_organization, organization_endpoint

    acme = make_organization("acme", "Acme Corp")
    add_member(user, acme)
    endpoint = organization_endpoint(acme)
    endpoint.jwt_access_tokens = True
    endpoint.save()
    client.force_login(user)
    code, verifier = code_for(client, public_app, resource=endpoint.uri)
    response = token_request(client, public_app, code, verifier, resource=endpoint.uri)
    assert response.status_code == 200, response.content
    token = response.json()["access_token"]
    claims = segments(token)[1]
    assert claims["aud"] == endpoint.uri
    assert claims["organization"] == {"id": acme.pk, "slug": "acme"}
    request = RequestFactory().get("/mcp/o/acme", HTTP_AUTHORIZATION=f"Bearer {token}")
    resource = ProtectedResource.objects.get(uri=endpoint.uri)
    assert authenticate_bearer(request, resource).organization.pk == acme.pk
    OrganizationMembership.objects.filter(user=user, organization=acme).delete()
    with pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(RequestFactory().get("/mcp/o/acme", HTTP_AUTHORIZATION=f"Bearer {token}"), resource)
    assert refused.value.status == 401 and refused.value.error_description == "The access token was revoked."


def test_the_act_claim_of_a_token_exchange(jwt_resource, public_app, user):
    from types import SimpleNamespace

    from mcp_oauth.authorization_server.tokens.jwt_access import access_token_claims

    act = {"sub": "agent-7", "act": {"sub": "orchestrator"}}
    request = SimpleNamespace(client=public_app, user=user, mcp_act=act)
    claims = access_token_claims({"scope": "mcp", "expires_in": 300}, request, jwt_resource, 1_000)
    assert claims["act"] == act
    assert (claims["iat"], claims["exp"], claims["sub"]) == (1_000, 1_300, str(user.pk))
    machine = access_token_claims(
        {"scope": "mcp", "expires_in": 60}, SimpleNamespace(client=public_app, user=None), jwt_resource, 5
    )
    assert machine["sub"] == public_app.client_id and "act" not in machine


def test_the_command_rotates_lists_and_prunes(jwt_resource):
    from io import StringIO

    from django.core.management import call_command

    out = StringIO()
    call_command("rotate_access_token_keys", "--alg", "RS256", "--publish-seconds", "0", stdout=out)
    assert "created RS256 key" in out.getvalue() and "retires at" in out.getvalue()
    assert AccessTokenSigningKey.objects.count() == 2
    listing = StringIO()
    call_command("rotate_access_token_keys", "--list", stdout=listing)
    assert listing.getvalue().count("published") == 2
    assert AccessTokenSigningKey.objects.signing().alg == "RS256"
    out = StringIO()
    call_command("rotate_access_token_keys", "--reencrypt", stdout=out)
    assert out.getvalue().strip() == "re-encrypted 2 keys"


def test_an_rs256_key_signs_tokens_the_site_accepts(logged_in, jwt_resource, public_app):
    signing_keys.rotate(alg="RS256", publish_seconds=0)
    token = first_pair(logged_in, public_app)["access_token"]
    assert segments(token)[0]["alg"] == "RS256"
    assert bearer_works(logged_in, token)


def test_checks_report_a_jwt_resource_without_a_signing_key_and_bad_settings(resource, settings, monkeypatch):
    from mcp_oauth.resource_server.checks import check_jwt_access_token_keys, check_jwt_access_token_settings

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": True}
    assert check_jwt_access_token_keys(None, databases=["default"]) == []
    resource.jwt_access_tokens = True
    resource.save()
    assert [m.id for m in check_jwt_access_token_keys(None, databases=["default"])] == ["mcp_oauth.E170"]
    assert check_jwt_access_token_keys(None) == []  # a database check only
    signing_keys.rotate()
    assert check_jwt_access_token_keys(None, databases=["default"]) == []
    # a token cache of each process's own in a multi-process site: the deny-list reaches no other
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE_SHARED": False}
    monkeypatch.setenv("WEB_CONCURRENCY", "4")
    assert [m.id for m in check_jwt_access_token_keys(None, databases=["default"])] == ["mcp_oauth.W173"]
    assert check_jwt_access_token_settings(None) == []
    settings.MCP_OAUTH = {
        **settings.MCP_OAUTH,
        "JWT_ACCESS_TOKEN_ALGORITHM": "HS256",
        "JWT_ACCESS_TOKEN_ENCRYPTION_KEYS": ["short"],
        "JWKS_MAX_AGE_SECONDS": -1,
    }
    assert sorted(m.id for m in check_jwt_access_token_settings(None)) == [
        "mcp_oauth.E171",
        "mcp_oauth.E171",
        "mcp_oauth.E172",
    ]


def test_encryption_keys_setting_and_reencryption(jwt_resource, settings):
    key = AccessTokenSigningKey.objects.get()
    first = "a" * 40
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWT_ACCESS_TOKEN_ENCRYPTION_KEYS": [first, settings.SECRET_KEY]}
    assert signing_keys.reencrypt() == 1
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWT_ACCESS_TOKEN_ENCRYPTION_KEYS": [first]}
    key.refresh_from_db()
    assert b"PRIVATE KEY" in signing_keys.decrypt_private_key(key.private_key)


def test_the_event_loop_path_accepts_a_jwt_and_defers_a_denied_one(logged_in, jwt_resource, public_app, settings):
    from asgiref.sync import async_to_sync

    from mcp_oauth.resource_server.authentication import authenticate_bearer_cached
    from mcp_oauth.resource_server.jwt_keys import deny

    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REVOCATION_CHECK_SECONDS": 3600}
    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)  # the thread path loaded the registry, the key ring and the client
    request = RequestFactory().post("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    with CaptureQueriesContext(connection) as queries:
        principal = async_to_sync(authenticate_bearer_cached)(request, RESOURCE)
    assert principal is not None and principal.client_id == public_app.client_id
    assert principal.access_token.claims["aud"] == RESOURCE
    assert queries.captured_queries == []
    deny([(hashlib.sha256(token.encode()).hexdigest(), segments(token)[1]["exp"])])
    assert async_to_sync(authenticate_bearer_cached)(request, RESOURCE) is None  # the thread path answers 401
    assert bearer_status(logged_in, token) == 401


def test_a_token_verified_once_is_not_verified_again_but_still_checked(logged_in, jwt_resource, public_app):
    from unittest import mock

    from mcp_oauth.resource_server import jwt_tokens

    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)
    with mock.patch.object(jwt_tokens, "verify_access_token", side_effect=AssertionError("verified again")):
        assert bearer_works(logged_in, token)
        other = ProtectedResource.objects.create(uri="http://testserver/other", scopes="mcp", jwt_access_tokens=True)
        request = RequestFactory().get("/other", HTTP_AUTHORIZATION=f"Bearer {token}")
        with pytest.raises(BearerChallenge) as refused:
            authenticate_bearer(request, ProtectedResource.objects.get(pk=other.pk))
    assert refused.value.error_description == "The access token was not issued for this resource."


def test_a_refresh_issues_a_new_jwt_and_denies_the_old_one(logged_in, jwt_resource, public_app):
    pair = first_pair(logged_in, public_app)
    old = pair["access_token"]
    response = logged_in.post(
        "/oauth/token",
        {"grant_type": "refresh_token", "refresh_token": pair["refresh_token"], "client_id": public_app.client_id},
    )
    assert response.status_code == 200, response.content
    new = response.json()["access_token"]
    assert segments(new)[0]["typ"] == "at+jwt" and segments(new)[1]["jti"] != segments(old)[1]["jti"]
    assert bearer_works(logged_in, new)
    assert bearer_status(logged_in, old) == 401  # the rotation deleted its row: denied


def test_introspection_answers_for_a_jwt_from_its_row(logged_in, jwt_resource, public_app):
    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import ClientProfile
    from tests.support.oauth_helpers import basic

    Application = get_application_model()
    rs = Application(name="rs", client_type="confidential", authorization_grant_type="client-credentials")
    secret = rs.client_secret
    rs.save()
    ClientProfile.objects.create(application=rs).resource_server_for.add(jwt_resource)
    token = first_pair(logged_in, public_app)["access_token"]
    answer = logged_in.post("/oauth/introspect", {"token": token}, HTTP_AUTHORIZATION=basic(rs.client_id, secret))
    assert answer.status_code == 200
    assert answer.json()["active"] is True and answer.json()["client_id"] == public_app.client_id


def test_a_client_credentials_jwt_speaks_for_the_client(client, jwt_resource, service):
    from tests.support.oauth_helpers import basic

    app, secret = service
    response = client.post(
        "/oauth/token",
        {"grant_type": "client_credentials", "scope": "mcp", "resource": RESOURCE},
        HTTP_AUTHORIZATION=basic(app.client_id, secret),
    )
    assert response.status_code == 200, response.content
    token = response.json()["access_token"]
    assert segments(token)[1]["sub"] == app.client_id
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    principal = authenticate_bearer(request, ProtectedResource.objects.get(uri=RESOURCE))
    assert principal.is_machine and principal.user is None and principal.client_id == app.client_id


def test_a_cache_outage_degrades_to_the_database_for_a_jwt(logged_in, jwt_resource, public_app, settings):
    token = first_pair(logged_in, public_app)["access_token"]
    settings.CACHES = {
        **settings.CACHES,
        "down": {"BACKEND": "mcp_oauth.shared.redis_cache.RedisCache", "LOCATION": "redis://127.0.0.1:1/0"},
    }
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "TOKEN_CACHE": "down"}
    resource = ProtectedResource.objects.get(uri=RESOURCE)
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert authenticate_bearer(request, resource).client_id == public_app.client_id
    get_access_token_model().objects.all().delete()  # revoked while the cache is away
    with pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(request, resource)
    assert refused.value.error_description == "The access token was revoked."


def test_a_key_published_by_another_process_is_loaded_on_its_generation(jwt_resource):
    from django.core.cache import caches

    from mcp_oauth.resource_server.jwt_keys import KEYS_GENERATION_KEY, key_ring_for_generation
    from mcp_oauth.settings import mcp_oauth_settings

    cache = caches[mcp_oauth_settings.TOKEN_CACHE]
    ring = key_ring()
    generation = cache.get(KEYS_GENERATION_KEY)
    assert key_ring_for_generation(generation) is ring
    # another process rotates: its rows are in the database, its new generation in the shared cache
    AccessTokenSigningKey.objects.bulk_create(
        [
            AccessTokenSigningKey(
                kid="other-process",
                alg="ES256",
                public_jwk={**AccessTokenSigningKey.objects.get().public_jwk, "kid": "other-process"},
                private_key="-",
                signs_from=timezone.now() + timedelta(days=1),
            )
        ]
    )  # bulk_create sends no signal: this process has not heard of it
    assert key_ring() is ring and "other-process" not in ring.key_set
    cache.set(KEYS_GENERATION_KEY, "changed-elsewhere", timeout=None)
    assert key_ring_for_generation("changed-elsewhere") is None  # the event-loop path defers to the thread
    reloaded = key_ring()
    assert "other-process" in reloaded.key_set and reloaded is not ring


def test_an_unknown_kid_costs_no_query(logged_in, jwt_resource, public_app):
    token = first_pair(logged_in, public_app)["access_token"]
    assert bearer_works(logged_in, token)
    head, body, signature = token.split(".")
    header = {**segments(token)[0], "kid": "unknown"}
    forged = f"{base64.urlsafe_b64encode(json.dumps(header).encode()).rstrip(b'=').decode()}.{body}.{signature}"
    resource = ProtectedResource.objects.get(uri=RESOURCE)
    request = RequestFactory().get("/mcp", HTTP_AUTHORIZATION=f"Bearer {forged}")
    with CaptureQueriesContext(connection) as queries, pytest.raises(BearerChallenge) as refused:
        authenticate_bearer(request, resource)
    assert refused.value.error_description == "The access token is signed with an unknown key."
    assert queries.captured_queries == []
