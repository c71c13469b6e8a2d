"""Attacks on JWT access tokens (RFC 9068, RFC 8725): forged, confused, tampered, stale or oversized
tokens are refused by the strict verification and by the site's resource server (401
``invalid_token``), never accepted and never a 500."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time

import pytest
from cryptography.hazmat.primitives import serialization

from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.shared.access_jwt import InvalidAccessToken, KeySet, sign_access_token, verify_access_token
from tests.support.oauth_helpers import bearer_works, first_pair

ISSUER = "http://testserver"
AUDIENCE = "http://testserver/mcp"


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def segment(value: dict | str) -> str:
    return b64((value if isinstance(value, str) else json.dumps(value)).encode())


def claims(**changes) -> dict:
    now = int(time.time())
    base = {
        "iss": ISSUER,
        "sub": "1",
        "aud": AUDIENCE,
        "client_id": "client",
        "scope": "mcp",
        "iat": now,
        "exp": now + 600,
        "jti": "j-" + str(now),
    }
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


@pytest.fixture
def key(db):
    row = signing_keys.create_key("ES256")
    return row, signing_keys.private_key(row.private_key), KeySet.from_jwks({"keys": [row.public_jwk]})


def sign(key, payload: dict, **header) -> str:
    row, private, _ = key
    head = {"alg": "ES256", "typ": "at+jwt", "kid": row.kid, **header}
    head = {k: v for k, v in head.items() if v is not None}
    import jwt

    return jwt.encode(payload, private, algorithm="ES256", headers=head)


def verify(token: str, keys: KeySet, **options):
    return verify_access_token(token, keys=keys, issuer=ISSUER, audience=AUDIENCE, **options)


def refused(token: str, keys: KeySet, reason: str, **options) -> InvalidAccessToken:
    with pytest.raises(InvalidAccessToken) as caught:
        verify(token, keys, **options)
    assert caught.value.reason == reason, str(caught.value)
    return caught.value


def test_a_good_token_passes(key):
    row, private, keys = key
    token = sign_access_token(claims(), private_key=private, kid=row.kid, alg="ES256")
    assert verify(token, keys).client_id == "client"


def test_alg_none_is_refused(key):
    token = f"{segment({'alg': 'none', 'typ': 'at+jwt', 'kid': key[0].kid})}.{segment(claims())}."
    refused(token, key[2], "header")


def test_hs256_signed_with_the_public_key_is_refused(key):
    row, private, keys = key
    public_pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    signing_input = f"{segment({'alg': 'HS256', 'typ': 'at+jwt', 'kid': row.kid})}.{segment(claims())}"
    mac = hmac.new(public_pem, signing_input.encode(), hashlib.sha256).digest()
    refused(f"{signing_input}.{b64(mac)}", keys, "header")


def test_an_alg_that_is_not_the_keys_is_refused(key, db):
    rsa = signing_keys.create_key("RS256")
    keys = KeySet.from_jwks({"keys": [key[0].public_jwk, rsa.public_jwk]})
    # the RSA key's kid with an ES256 signature: the key decides the algorithm (RFC 8725 §3.1)
    token = sign(key, claims(), kid=rsa.kid)
    refused(token, keys, "header")


def test_an_unknown_kid_is_refused(key):
    refused(sign(key, claims(), kid="not-a-key"), key[2], "kid")
    refused(sign(key, claims(), kid=None), key[2], "kid")


@pytest.mark.parametrize("typ", [None, "JWT", "at+JWT+x", "application/jwt"])
def test_a_missing_or_other_typ_is_refused(key, typ):
    refused(sign(key, claims(), typ=typ), key[2], "header")


def test_application_at_jwt_typ_is_accepted(key):
    assert verify(sign(key, claims(), typ="application/at+jwt"), key[2]).subject == "1"


@pytest.mark.parametrize("member", [{"jwk": {"kty": "EC"}}, {"jku": "https://evil.example/jwks"}, {"crit": ["exp"]}])
def test_keys_carried_by_the_token_and_crit_are_refused(key, member):
    refused(sign(key, claims(), **member), key[2], "header")


def test_an_expired_token_is_refused(key):
    now = int(time.time())
    refused(sign(key, claims(iat=now - 700, exp=now - 100)), key[2], "expired")
    assert verify(sign(key, claims(iat=now - 700, exp=now - 3)), key[2], leeway=5)


def test_a_token_not_valid_yet_is_refused(key):
    now = int(time.time())
    refused(sign(key, claims(nbf=now + 120)), key[2], "not_yet_valid")
    refused(sign(key, claims(iat=now + 120, exp=now + 720)), key[2], "not_yet_valid")


@pytest.mark.parametrize("aud", ["http://testserver/other", ["http://testserver/mcp", "http://testserver/other"], None])
def test_a_token_for_another_audience_is_refused(key, aud):
    refused(sign(key, claims(aud=aud)), key[2], "audience")


def test_a_token_of_another_issuer_is_refused(key):
    refused(sign(key, claims(iss="http://evil.example")), key[2], "issuer")


@pytest.mark.parametrize("missing", ["sub", "client_id", "jti", "exp", "iat"])
def test_a_token_missing_a_required_claim_is_refused(key, missing):
    refused(sign(key, claims(**{missing: None})), key[2], "claims")


@pytest.mark.parametrize("value", [True, 1.5, "1765136400"])
def test_exp_that_is_not_an_integer_is_refused(key, value):
    refused(sign(key, claims(exp=value)), key[2], "claims")


def test_a_tampered_token_is_refused(key):
    head, body, signature = sign(key, claims()).split(".")
    forged = segment(claims(scope="mcp admin"))
    refused(f"{head}.{forged}.{signature}", key[2], "signature")
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    refused(f"{head}.{body}.{flipped}", key[2], "signature")


def test_duplicate_json_members_are_refused(key):
    row, private, keys = key
    payload = json.dumps(claims())[:-1] + ', "aud": "http://testserver/mcp"}'
    header = '{"alg": "ES256", "typ": "at+jwt", "kid": "%s", "kid": "%s"}' % (row.kid, row.kid)
    import jwt

    for head, body in (
        (segment(header), segment(claims())),
        (segment({"alg": "ES256", "typ": "at+jwt", "kid": row.kid}), segment(payload)),
    ):
        signing_input = f"{head}.{body}".encode()
        raw = jwt.algorithms.ECAlgorithm(jwt.algorithms.ECAlgorithm.SHA256).sign(signing_input, private)
        refused(f"{head}.{body}.{b64(raw)}", keys, "malformed")


def test_a_huge_token_is_refused_before_any_parsing(key):
    huge = sign(key, claims(padding="x" * 5000))
    refused(huge, key[2], "malformed")


@pytest.mark.parametrize("token", ["a.b", "a.b.c.d", "eyJ.eyJ.", "....", "eyJhbGciOiJFUzI1NiJ9==.e30.AA"])
def test_malformed_tokens_are_refused(key, token):
    with pytest.raises(InvalidAccessToken):
        verify(token, key[2])


def test_a_jwks_with_private_or_symmetric_or_weak_keys_yields_none_of_them(key, db):
    row, private, _ = key
    private_jwk = json.loads(__import__("jwt").algorithms.ECAlgorithm.to_jwk(private))
    keys = KeySet.from_jwks(
        {
            "keys": [
                {**private_jwk, "kid": "private"},
                {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
                {**row.public_jwk, "use": "enc", "kid": "enc"},
                {"kty": "EC", "crv": "P-256", "x": "AA", "y": "AA", "kid": "broken"},
            ]
        }
    )
    assert len(keys) == 0


# --- through the site's resource server --------------------------------------------------------


@pytest.fixture
def jwt_site(client, resource, user):
    resource.jwt_access_tokens = True
    resource.save()
    signing_keys.rotate()
    client.force_login(user)
    return client


def test_the_resource_server_answers_401_to_a_forged_token(jwt_site, public_app):
    from mcp_oauth.models import AccessTokenSigningKey

    good = first_pair(jwt_site, public_app)["access_token"]
    assert bearer_works(jwt_site, good)
    head, body, signature = good.split(".")
    payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    forged = f"{head}.{segment({**payload, 'scope': 'mcp admin', 'sub': '999'})}.{signature}"
    response = jwt_site.post(
        "/mcp",
        data='{"jsonrpc":"2.0","id":1,"method":"ping"}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {forged}",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
    )
    assert response.status_code == 401
    assert 'error="invalid_token"' in response["WWW-Authenticate"]
    # a self-made key with a kid of the site's: refused on the signature
    other = signing_keys.create_key("ES256")
    AccessTokenSigningKey.objects.filter(pk=other.pk).delete()
    site_kid = AccessTokenSigningKey.objects.get().kid
    token = sign_access_token(
        payload, private_key=signing_keys.private_key(other.private_key), kid=site_kid, alg="ES256"
    )
    assert not bearer_works(jwt_site, token)
