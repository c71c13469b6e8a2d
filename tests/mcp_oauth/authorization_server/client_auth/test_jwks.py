"""Key sets of real identity providers (issue 28): a JWK Set at a ``jwks_uri`` has its own size
limit (``JWKS_MAX_SIZE``) and key count limit (``JWKS_MAX_KEYS``), not the client metadata
document's 5 KB.

The set here has the shape Microsoft Entra ID publishes at ``/discovery/v2.0/keys``: RSA-2048 keys,
each with ``kid`` = ``x5t``, ``n``, ``e``, a self-signed certificate in ``x5c`` and an ``issuer``
member — six of them make about 9 KB. It is served over HTTPS from loopback (test CA) and used
end to end by an ID-JAG (jwt-bearer grant) and a ``private_key_jwt`` client.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import json

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID
from jwt.algorithms import RSAAlgorithm
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import AuditEvent, ClientProfile
from tests.mcp_oauth.authorization_server.enterprise_identity.test_jwt_bearer import (
    IDP,
    ISSUER,
    TYP,
    assert_error,
    chat_client,  # noqa: F401 - fixture
    idp_key,  # noqa: F401 - fixture
    provider,  # noqa: F401 - fixture
    redeem,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures
from tests.support.jwt_keys import SigningKey, claims

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@functools.lru_cache(maxsize=1)
def entra_shaped_keys(count: int = 6) -> tuple[list[SigningKey], dict]:
    """``count`` RSA-2048 signing keys and their key set in Entra ID's published shape."""
    signing, jwks = [], []
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "accounts.accesscontrol.windows.net")])
    for _ in range(count):
        private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(private.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=5 * 365))
            .sign(private, hashes.SHA256())
        )
        der = certificate.public_bytes(serialization.Encoding.DER)
        x5t = _b64url(hashlib.sha1(der).digest())
        jwk = RSAAlgorithm.to_jwk(private.public_key(), as_dict=True)
        jwks.append(
            {
                "kty": "RSA",
                "use": "sig",
                "kid": x5t,
                "x5t": x5t,
                "n": jwk["n"],
                "e": jwk["e"],
                "x5c": [base64.b64encode(der).decode()],
                "cloud_instance_name": "microsoftonline.com",
                "issuer": f"https://login.microsoftonline.com/{TENANT}/v2.0",
            }
        )
        signing.append(SigningKey(private, "RS256", x5t))
    return signing, {"keys": jwks}


@pytest.fixture
def entra(cimd_env):
    keys, key_set = entra_shaped_keys()
    body = json.dumps(key_set).encode()
    cimd_env.server.serve("/discovery/v2.0/keys", body=body, headers={"Cache-Control": "max-age=300"})
    return keys, cimd_env.url("/discovery/v2.0/keys"), len(body)


def test_the_set_has_entra_s_size():
    _keys, key_set = entra_shaped_keys()
    size = len(json.dumps(key_set).encode())
    assert 8_500 < size < 11_000 and len(key_set["keys"]) == 6  # about 9 KB, well over CIMD's 5,120 bytes


def _id_jag(key: SigningKey, app, resource_uri: str) -> str:
    values = {"iss": IDP, "sub": "U019488227", "aud": ISSUER, "resource": resource_uri, "client_id": app.client_id}
    return key.sign(claims(**values, scope="mcp"), typ=TYP)


@pytest.fixture
def entra_provider(provider, entra):
    provider.jwks = None
    provider.jwks_uri = entra[1]
    provider.save()
    return provider


@pytest.mark.django_db
def test_id_jag_signed_with_any_key_of_an_entra_shaped_set(
    client, entra_provider, chat_client, resource, entra, settings
):
    keys, _uri, size = entra
    assert size > 5120  # refused before JWKS_MAX_SIZE existed
    app, secret = chat_client
    for key in (keys[0], keys[5]):
        response = redeem(client, app, secret, _id_jag(key, app, resource.uri))
        assert response.status_code == 200, response.content


@pytest.mark.django_db
def test_id_jag_key_set_over_the_limit_is_invalid_grant(client, entra_provider, chat_client, resource, entra, settings):
    keys, _uri, size = entra
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWKS_MAX_SIZE": 8192}
    app, secret = chat_client
    response = redeem(client, app, secret, _id_jag(keys[0], app, resource.uri))
    assert_error(response, "invalid_grant")
    assert response.json()["error_description"] == "The key set is larger than 8192 bytes."
    event = AuditEvent.objects.get(kind=AuditEvent.Kind.ASSERTION_REFUSED)
    assert event.detail["reason"] == "too_large"


@pytest.mark.django_db
def test_id_jag_key_set_with_too_many_keys_is_invalid_grant(
    client, entra_provider, chat_client, resource, entra, settings
):
    keys, _uri, _size = entra
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWKS_MAX_KEYS": 5}
    app, secret = chat_client
    response = redeem(client, app, secret, _id_jag(keys[0], app, resource.uri))
    assert_error(response, "invalid_grant")
    assert response.json()["error_description"] == "The signer's key set holds more than 5 keys."


@pytest.fixture
def entra_client(resource, entra):
    app = get_application_model().objects.create(
        name="machine", client_type="confidential", authorization_grant_type="client-credentials"
    )
    ClientProfile.objects.create(application=app, jwks_uri=entra[1])
    return app


def _client_assertion(client, app, key: SigningKey):
    assertion = key.sign(claims(iss=app.client_id, sub=app.client_id, aud=ISSUER))
    data = {"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE, "client_assertion": assertion}
    return client.post("/oauth/token", {**data, "scope": "mcp"})


@pytest.mark.django_db
def test_private_key_jwt_client_with_an_entra_shaped_set(client, entra_client, entra):
    keys, _uri, _size = entra
    response = _client_assertion(client, entra_client, keys[3])
    assert response.status_code == 200, response.content


@pytest.mark.django_db
def test_private_key_jwt_key_set_over_the_limit_is_invalid_client(client, entra_client, entra, settings):
    keys, _uri, _size = entra
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "JWKS_MAX_SIZE": 8192}
    response = _client_assertion(client, entra_client, keys[3])
    assert response.status_code == 401, response.content
    assert response.json() == {"error": "invalid_client", "error_description": "The key set is larger than 8192 bytes."}
    assert not get_access_token_model().objects.exists()


@pytest.mark.django_db
def test_the_default_limit_refuses_a_set_over_64_kib(client, entra_provider, chat_client, resource, entra, cimd_env):
    keys, uri, _size = entra
    _signing, key_set = entra_shaped_keys()
    padded = {"keys": key_set["keys"] * 8}  # 48 keys (under JWKS_MAX_KEYS), about 75 KB
    body = json.dumps(padded).encode()
    assert len(body) > 65536
    cimd_env.server.serve("/discovery/v2.0/keys", body=body)
    app, secret = chat_client
    response = redeem(client, app, secret, _id_jag(keys[0], app, resource.uri))
    assert_error(response, "invalid_grant")
    assert response.json()["error_description"] == "The key set is larger than 65536 bytes."


HOSTILE_SETS = {
    "NaN": b'{"keys": [{"kty": "RSA", "kid": "a", "n": "AQAB", "e": "AQAB", "exp": NaN}]}',
    "1e400": b'{"keys": [{"kty": "RSA", "kid": "a", "n": "AQAB", "e": "AQAB", "x": 1e400}]}',
    "duplicate kid": b'{"keys": [{"kty": "RSA", "kid": "a", "kid": "b", "n": "AQAB", "e": "AQAB"}]}',
    "duplicate keys": b'{"keys": [], "keys": [{"kty": "RSA", "kid": "a", "n": "AQAB", "e": "AQAB"}]}',
    "NUL in kid": b'{"keys": [{"kty": "RSA", "kid": "a\\u0000", "n": "AQAB", "e": "AQAB"}]}',
    "control in kid": b'{"keys": [{"kty": "RSA", "kid": "a\\u001b[2J", "n": "AQAB", "e": "AQAB"}]}',
    "kty not a string": b'{"keys": [{"kty": 1, "kid": "a", "n": "AQAB", "e": "AQAB"}]}',
}


@pytest.mark.django_db
@pytest.mark.parametrize("case", sorted(HOSTILE_SETS))
def test_hostile_key_sets_are_invalid_grant(client, entra_provider, chat_client, resource, entra, cimd_env, case):
    keys, _uri, _size = entra
    cimd_env.server.serve("/discovery/v2.0/keys", body=HOSTILE_SETS[case])
    app, secret = chat_client
    assert_error(redeem(client, app, secret, _id_jag(keys[0], app, resource.uri)), "invalid_grant")


@pytest.mark.parametrize("value", [0, -1, True, "64k", None, 1.5])
@pytest.mark.parametrize("key", ["JWKS_MAX_SIZE", "JWKS_MAX_KEYS"])
def test_limits_that_are_not_positive_integers_are_e097(settings, key, value):
    from mcp_oauth.checks import check_key_set_limits

    assert check_key_set_limits(None) == []
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, key: value}
    [error] = check_key_set_limits(None)
    assert error.id == "mcp_oauth.E097" and key in error.msg


@pytest.mark.parametrize(
    "value",
    [
        {"keys": [{"kty": "RSA", "kid": "a", "n": "AQAB", "e": "AQAB", "x": float("nan")}]},
        {"keys": [{"kty": "RSA", "kid": "a\x00", "n": "AQAB", "e": "AQAB"}]},
        {"keys": [{"kty": "RSA", "kid": "a\n", "n": "AQAB", "e": "AQAB"}]},
        {"keys": [{"kty": "RSA", "kid": str(i), "n": "AQAB", "e": "AQAB"} for i in range(51)]},
    ],
    ids=["nan", "nul-kid", "newline-kid", "51-keys"],
)
def test_the_admin_refuses_an_inline_key_set_the_reader_refuses(value):
    from django import forms

    from mcp_oauth.admin.enterprise import clean_key_set

    with pytest.raises(forms.ValidationError):
        clean_key_set(value)


def test_the_admin_keeps_an_entra_shaped_inline_key_set():
    from mcp_oauth.admin.enterprise import clean_key_set

    _keys, key_set = entra_shaped_keys()
    assert clean_key_set(key_set) == key_set
