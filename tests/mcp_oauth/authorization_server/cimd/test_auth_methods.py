"""Client authentication negotiated from a CIMD document's ``token_endpoint_auth_methods_supported``.

OpenID Connect RP Metadata Choices 1.0 and MCP SEP-3149: the document lists the methods its client
can use (most preferred first) and the server takes the first one it supports and the client is
eligible for (``none``; ``private_key_jwt`` with keys). The list decides when both it and the
singular ``token_endpoint_auth_method`` are present; the singular alone is honoured as before.

Pure checks of :func:`validate_document` first, then real documents served over HTTPS by the
loopback document server (``tests/support/https_server.py``) through the authorization and token
endpoints.
"""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.authorization_server.cimd.errors import InvalidDocument
from mcp_oauth.authorization_server.cimd.metadata_document import validate_document
from mcp_oauth.models import ClientMetadataDocument
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import claims, make_key
from tests.support.oauth_helpers import authorize_params, get_code, pkce_pair, token_request

CLIENT_ID = "https://client.example/metadata.json"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ISSUER = "http://testserver"
JWKS = {"keys": [{"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU", "y": "x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}  # fmt: skip


ABSENT = object()


def document(**members):
    """A valid document for :data:`CLIENT_ID`; ``members`` override or add (:data:`ABSENT` removes, ``None`` is JSON null)."""
    base = {"client_id": CLIENT_ID, "client_name": "Choices", "redirect_uris": ["http://127.0.0.1/callback"]}
    base.update(members)
    return {k: v for k, v in base.items() if v is not ABSENT}


def method_of(**members) -> str:
    return validate_document(document(**members), CLIENT_ID)["token_endpoint_auth_method"]


def refusal(**members) -> InvalidDocument:
    with pytest.raises(InvalidDocument) as caught:
        validate_document(document(**members), CLIENT_ID)
    assert caught.value.error == "invalid_client" and caught.value.reason == "auth_method"
    return caught.value


# --- negotiation (pure) --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "methods, keys, expected",
    [
        (["none"], {}, "none"),
        (["private_key_jwt"], {"jwks": JWKS}, "private_key_jwt"),
        (["private_key_jwt"], {"jwks_uri": "https://client.example/jwks.json"}, "private_key_jwt"),
        (["private_key_jwt", "none"], {"jwks": JWKS}, "private_key_jwt"),  # the client's order
        (["none", "private_key_jwt"], {"jwks": JWKS}, "none"),
        (["private_key_jwt", "none"], {}, "none"),  # not eligible for private_key_jwt without keys
        (["private_key_jwt", "none"], {"jwks_uri": "http://client.example/jwks.json"}, "none"),  # not https
        (["tls_client_auth", "urn:example:attestation", "none"], {}, "none"),  # unknown methods skipped
        (["none", "none", "private_key_jwt", "none"], {"jwks": JWKS}, "none"),  # duplicates
    ],
)
def test_the_first_method_both_sides_can_use_is_chosen(methods, keys, expected):
    assert (
        method_of(token_endpoint_auth_methods_supported=methods, token_endpoint_auth_method=ABSENT, **keys) == expected
    )


def test_the_singular_alone_is_still_honoured():
    assert method_of() == "none"  # absent: a public client (as before SEP-3149)
    assert method_of(token_endpoint_auth_method="none") == "none"
    assert method_of(token_endpoint_auth_method="private_key_jwt", jwks=JWKS) == "private_key_jwt"
    assert "needs jwks" in str(refusal(token_endpoint_auth_method="private_key_jwt"))
    assert '"none" or "private_key_jwt"' in str(refusal(token_endpoint_auth_method="tls_client_auth"))


def test_when_both_are_present_the_list_decides():
    # Consistent: the singular is one of the listed methods (SEP-3149's transition shape).
    assert method_of(token_endpoint_auth_methods_supported=["private_key_jwt", "none"], token_endpoint_auth_method="private_key_jwt", jwks=JWKS) == "private_key_jwt"  # fmt: skip
    # Inconsistent: the singular names a method the list does not: the list wins, the singular is ignored.
    assert method_of(token_endpoint_auth_methods_supported=["none"], token_endpoint_auth_method="private_key_jwt", jwks=JWKS) == "none"  # fmt: skip
    assert method_of(token_endpoint_auth_methods_supported=["private_key_jwt"], token_endpoint_auth_method="none", jwks=JWKS) == "private_key_jwt"  # fmt: skip
    # An unsupported singular does not refuse a document whose list offers a usable method.
    assert method_of(token_endpoint_auth_methods_supported=["none"], token_endpoint_auth_method="tls_client_auth") == "none"  # fmt: skip


def test_the_accepted_document_records_the_choice_and_the_list_once():
    accepted = validate_document(
        document(token_endpoint_auth_methods_supported=["private_key_jwt", "none", "private_key_jwt"], jwks=JWKS),
        CLIENT_ID,
    )
    assert accepted["token_endpoint_auth_method"] == "private_key_jwt"
    assert accepted["token_endpoint_auth_methods_supported"] == ["private_key_jwt", "none"]
    # The cached document is validated again on revalidation (HTTP 304): same answer.
    assert validate_document(accepted, CLIENT_ID)["token_endpoint_auth_method"] == "private_key_jwt"


@pytest.mark.parametrize(
    "methods",
    [[], "none", {"none": True}, None, 1, [None], [1], ["none", 2], [["none"]], [{"m": "none"}], [""], [True]],
)
def test_a_list_that_is_not_a_non_empty_array_of_strings_refuses_the_document(methods):
    error = refusal(token_endpoint_auth_methods_supported=methods)
    assert "token_endpoint_auth_methods_supported" in str(error)


@pytest.mark.parametrize("secret_method", ["client_secret_basic", "client_secret_post", "client_secret_jwt"])
def test_shared_secret_methods_are_refused_in_either_member(secret_method):
    assert "shared secret" in str(refusal(token_endpoint_auth_methods_supported=["none", secret_method]))
    assert "shared secret" in str(refusal(token_endpoint_auth_methods_supported=["none"], token_endpoint_auth_method=secret_method))  # fmt: skip


def test_a_list_with_nothing_usable_here_refuses_the_document():
    error = refusal(token_endpoint_auth_methods_supported=["tls_client_auth", "private_key_jwt"])
    assert "None of the token_endpoint_auth_methods_supported is usable here" in str(error)
    assert error.detail == {"methods": ["tls_client_auth", "private_key_jwt"]}


# --- through the endpoints, documents served over HTTPS ---------------------------------------------


def _stub(client_id):
    return type("App", (), {"client_id": client_id})()


@pytest.mark.django_db
def test_a_listed_private_key_jwt_makes_a_confidential_client_that_signs_its_token_requests(
    client, user, resource, cimd_env
):
    key = make_key("ES256")
    cimd_env.server.serve("/choices-keys.json", body=key.jwks)
    client_id = cimd_env.publish(
        "/choices.json",
        token_endpoint_auth_method=None,
        token_endpoint_auth_methods_supported=["private_key_jwt", "none"],
        jwks_uri=cimd_env.url("/choices-keys.json"),
    )
    client.force_login(user)
    code, verifier, _ = get_code(client, _stub(client_id))
    application = get_application_model().objects.get(client_id=client_id)
    assert application.client_type == "confidential"
    stored = ClientMetadataDocument.objects.get(client_id=client_id).document
    assert stored["token_endpoint_auth_method"] == "private_key_jwt"

    unauthenticated = token_request(client, _stub(client_id), code, verifier)
    assert unauthenticated.status_code == 401 and unauthenticated.json()["error"] == "invalid_client"

    code, verifier, _ = get_code(client, _stub(client_id))
    assertion = key.sign(claims(iss=client_id, sub=client_id, aud=ISSUER))
    signed = token_request(
        client, _stub(client_id), code, verifier, client_assertion_type=ASSERTION_TYPE, client_assertion=assertion
    )
    assert signed.status_code == 200, signed.content
    assert get_access_token_model().objects.filter(application=application).count() == 1


@pytest.mark.django_db
def test_a_list_preferring_none_over_a_singular_private_key_jwt_makes_a_public_client(client, user, resource, cimd_env):
    key = make_key("ES256")
    client_id = cimd_env.publish(
        "/public-choice.json",
        token_endpoint_auth_method="private_key_jwt",
        token_endpoint_auth_methods_supported=["none", "private_key_jwt"],
        jwks=key.jwks,
    )
    client.force_login(user)
    code, verifier, _ = get_code(client, _stub(client_id))
    assert get_application_model().objects.get(client_id=client_id).client_type == "public"
    response = token_request(client, _stub(client_id), code, verifier)  # PKCE only, no client authentication
    assert response.status_code == 200, response.content


@pytest.mark.django_db
@pytest.mark.parametrize("methods", [[], ["none", 7], ["tls_client_auth"]])
def test_an_unusable_list_gets_the_invalid_document_error_page_and_no_client(client, user, resource, cimd_env, methods):
    client_id = cimd_env.publish("/bad-choices.json", token_endpoint_auth_methods_supported=methods)
    client.force_login(user)
    _, challenge = pkce_pair()
    page = client.get("/oauth/authorize?" + urlencode(authorize_params(_stub(client_id), challenge)))
    assert page.status_code == 400 and "Location" not in page
    assert b'<strong id="error-code">invalid_client</strong>' in page.content
    assert b"token_endpoint_auth_methods_supported" in page.content
    assert not get_application_model().objects.filter(client_id=client_id).exists()
