"""Hostile ``token_endpoint_auth_methods_supported`` lists in CIMD documents (SEP-3149).

Each document is served over HTTPS by the loopback document server (standing in for an attacker's
host) and reached through the authorization endpoint: it is refused with ``invalid_client`` on an
error page (never a redirect, never a 500), leaves no client behind, and never yields a client
authenticated by a method the document could not use (a shared secret, a key it did not publish).
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_application_model

from mcp_oauth.models import ClientMetadataDocument
from tests.support.https_server import Route, cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.oauth_helpers import authorize_params, get_code, pkce_pair, token_request

pytestmark = pytest.mark.django_db

MEMBER = "token_endpoint_auth_methods_supported"


def _stub(client_id):
    return type("App", (), {"client_id": client_id})()


def _authorize(client, client_id):
    _, challenge = pkce_pair()
    return client.get("/oauth/authorize?" + urlencode(authorize_params(_stub(client_id), challenge)))


def _assert_refused(page, client_id, text: bytes = b""):
    assert page.status_code == 400, (page.status_code, page.content[-400:])
    assert "Location" not in page
    assert b'<strong id="error-code">invalid_client</strong>' in page.content
    assert text in page.content
    assert not get_application_model().objects.filter(client_id=client_id).exists()
    cached = ClientMetadataDocument.objects.filter(client_id=client_id).first()
    assert cached is None or cached.document is None


HOSTILE = {
    # Thousands of entries (the document stays under the size limit): refused by count, not scanned for "none".
    "huge": (["x"] * 600 + ["none"], b"at most 16 methods"),
    "duplicates": (["none"] * 17, b"at most 16 methods"),
    "nested": ([[["none"]]], b"non-empty string"),
    "deep": ([[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["none"]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]], b"non-empty string"),
    "object entries": ([{"method": "none"}], b"non-empty string"),
    "a long entry": (["n" * 4_000, "none"], b"at most 128 characters"),
    "a string": ("none private_key_jwt", b"non-empty array"),
    "empty": ([], b"non-empty array"),
    "lookalike": (["n\u043ene", "NONE", "none ", "private_key_jwt"], b"None of the"),  # Cyrillic o, case, space
    "a shared secret among others": (["none", "client_secret_post"], b"shared secret"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_lists_are_refused_without_a_client(client, user, resource, cimd_env, name):
    methods, text = HOSTILE[name]
    client_id = cimd_env.publish("/hostile.json", **{MEMBER: methods})
    client.force_login(user)
    _assert_refused(_authorize(client, client_id), client_id, text)


def test_a_deeply_nested_list_at_the_size_limit_is_refused(client, user, resource, cimd_env):
    client_id = cimd_env.url("/deep.json")
    depth = 2400  # ~4.8 KB of brackets, under the document size limit (5 KB)
    body = (
        '{"client_id": "%s", "client_name": "Deep", "redirect_uris": ["http://127.0.0.1/callback"], "%s": %s"none"%s}'
        % (client_id, MEMBER, "[" * depth, "]" * depth)
    ).encode()
    cimd_env.server.serve("/deep.json", Route(body=body, headers={"Cache-Control": "max-age=60"}))
    client.force_login(user)
    page = _authorize(client, client_id)
    assert page.status_code == 400 and "Location" not in page
    assert b'<strong id="error-code">invalid_client</strong>' in page.content
    assert not get_application_model().objects.filter(client_id=client_id).exists()


def test_a_singular_private_key_jwt_without_keys_cannot_sneak_past_a_list(client, user, resource, cimd_env):
    """A list naming ``private_key_jwt`` without keys falls to ``none``: a public client, never a keyless confidential one."""
    client_id = cimd_env.publish(
        "/keyless.json", token_endpoint_auth_method="private_key_jwt", **{MEMBER: ["private_key_jwt", "none"]}
    )
    client.force_login(user)
    code, verifier, _ = get_code(client, _stub(client_id))
    application = get_application_model().objects.get(client_id=client_id)
    assert application.client_type == "public"
    stored = ClientMetadataDocument.objects.get(client_id=client_id).document
    assert stored["token_endpoint_auth_method"] == "none"
    assert token_request(client, _stub(client_id), code, verifier).status_code == 200


@pytest.mark.parametrize("jwks", [{"keys": []}, {"keys": [{}]}], ids=["empty key set", "a key without kty"])
def test_private_key_jwt_with_an_empty_key_set_falls_to_none(client, user, resource, cimd_env, jwks):
    """A JWK set with no usable key publishes no key: the list's next method (``none``) is chosen,
    never a confidential client that can never authenticate."""
    client_id = cimd_env.publish("/emptykeys.json", jwks=jwks, **{MEMBER: ["private_key_jwt", "none"]})
    client.force_login(user)
    code, verifier, _ = get_code(client, _stub(client_id))
    application = get_application_model().objects.get(client_id=client_id)
    assert application.client_type == "public"
    assert ClientMetadataDocument.objects.get(client_id=client_id).document["token_endpoint_auth_method"] == "none"
    assert token_request(client, _stub(client_id), code, verifier).status_code == 200


def test_a_list_of_private_key_jwt_alone_with_an_empty_key_set_is_refused(client, user, resource, cimd_env):
    client_id = cimd_env.publish("/onlyempty.json", jwks={"keys": []}, **{MEMBER: ["private_key_jwt"]})
    client.force_login(user)
    _assert_refused(_authorize(client, client_id), client_id, b"None of the")
