"""``mcp_oauth.shared.access_jwt``: signing and strict verification of JWT access tokens (RFC 9068,
RFC 8725) with keys made in the test, no database and no settings."""

from __future__ import annotations

import base64
import json

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa as rsa_keys

from mcp_oauth.shared.access_jwt import (
    MAX_TOKEN_LENGTH,
    InvalidAccessToken,
    KeySet,
    looks_like_jwt,
    sign_access_token,
    verify_access_token,
)
from tests.support.jwt_keys import hs256_with_public_key, make_key, unsigned

ISSUER = "https://as.example"
AUDIENCE = "https://rs.example/mcp"
NOW = 1_800_000_000


@pytest.fixture(scope="module")
def es256():
    return make_key("ES256", kid="es-1")


@pytest.fixture(scope="module")
def keys(es256):
    return KeySet.from_jwks({"keys": [es256.public_jwk]})


def claims(**values):
    base = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "42",
        "client_id": "client-1",
        "jti": "jti-1",
        "scope": "mcp",
        "iat": NOW - 10,
        "exp": NOW + 300,
    }
    base.update(values)
    return {k: v for k, v in base.items() if v is not None}


def signed(key, **values) -> str:
    return sign_access_token(claims(**values), private_key=key.private, kid=key.kid, alg=key.alg)


def verify(token, keys, **kwargs):
    return verify_access_token(token, keys=keys, issuer=ISSUER, audience=AUDIENCE, now=NOW, **kwargs)


def refused(token, keys, **kwargs) -> InvalidAccessToken:
    with pytest.raises(InvalidAccessToken) as error:
        verify(token, keys, **kwargs)
    return error.value


def b64(value) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()


def test_a_signed_token_verifies_and_exposes_its_claims(es256, keys):
    token = signed(es256, cnf={"jkt": "thumb"}, act={"sub": "agent"})
    header = json.loads(base64.urlsafe_b64decode(token.split(".")[0] + "=="))
    assert header == {"alg": "ES256", "kid": "es-1", "typ": "at+jwt"}
    assert looks_like_jwt(token)
    verified = verify(token, keys)
    assert verified.kid == "es-1"
    assert (verified.issuer, verified.subject, verified.client_id, verified.jti) == (ISSUER, "42", "client-1", "jti-1")
    assert (verified.scope, verified.issued_at, verified.expires_at) == ("mcp", NOW - 10, NOW + 300)
    assert verified.jkt == "thumb" and verified.actor == {"sub": "agent"}


def test_an_rs256_key_verifies_and_an_audience_list_of_the_resource_alone_is_accepted():
    rsa = make_key("RS256", kid="rs-1")
    keys = KeySet.from_jwks(json.dumps({"keys": [rsa.public_jwk]}))
    assert keys.kids == frozenset({"rs-1"}) and keys.get("rs-1").alg == "RS256"
    assert verify(signed(rsa, aud=[AUDIENCE]), keys).subject == "42"
    assert refused(signed(rsa, aud=[AUDIENCE, "https://other.example"]), keys).reason == "audience"


def test_sign_refuses_an_algorithm_not_accepted(es256):
    with pytest.raises(ValueError, match="unsupported access-token algorithm 'HS256'"):
        sign_access_token(claims(), private_key=b"secret", kid="k", alg="HS256")


@pytest.mark.parametrize(
    ("values", "reason", "message"),
    [
        ({"iss": "https://evil.example"}, "issuer", "The access token was issued by another authorization server."),
        ({"aud": "https://rs.example/other"}, "audience", "The access token was not issued for this resource."),
        ({"exp": NOW}, "expired", "The access token has expired."),
        ({"iat": NOW + 5}, "not_yet_valid", "The access token is not valid yet."),
        ({"nbf": NOW + 5}, "not_yet_valid", "The access token is not valid yet."),
        ({"sub": None}, "claims", "The access token has no sub."),
        ({"client_id": ""}, "claims", "The access token has no client_id."),
        ({"jti": 7}, "claims", "The access token has no jti."),
        ({"scope": ["mcp"]}, "claims", "The access token's scope is not a string."),
        ({"exp": float(NOW + 300)}, "claims", "The access token's exp, iat or nbf is not an integer."),
        ({"exp": True}, "claims", "The access token's exp, iat or nbf is not an integer."),
        ({"cnf": {"x5t#S256": "x"}}, "claims", "The access token's cnf is not a key thumbprint."),
    ],
)
def test_each_claim_check_refuses_with_its_reason(es256, keys, values, reason, message):
    error = refused(signed(es256, **values), keys)
    assert (error.reason, str(error)) == (reason, message)


def test_leeway_applies_to_exp_and_iat(es256, keys):
    assert verify(signed(es256, exp=NOW), keys, leeway=1).subject == "42"
    assert verify(signed(es256, iat=NOW + 5), keys, leeway=5).subject == "42"
    assert refused(signed(es256, iat=NOW + 6), keys, leeway=5).reason == "not_yet_valid"


def test_another_keys_signature_and_a_tampered_body_are_refused(es256, keys):
    impostor = make_key("ES256", kid="es-1")  # same kid, another key
    assert refused(signed(impostor), keys).reason == "signature"
    head, _, signature = signed(es256).split(".")
    assert refused(f"{head}.{b64(claims(sub='1'))}.{signature}", keys).reason == "signature"


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"alg": "ES256", "typ": "JWT", "kid": "es-1"}, "header"),  # an ID token or another JWT
        ({"alg": "ES256", "kid": "es-1"}, "header"),
        ({"alg": "ES384", "typ": "at+jwt", "kid": "es-1"}, "header"),
        ({"alg": "RS256", "typ": "at+jwt", "kid": "es-1"}, "header"),  # not the key's algorithm
        ({"alg": "ES256", "typ": "at+jwt", "kid": "es-1", "jku": "https://evil.example/jwks"}, "header"),
        ({"alg": "ES256", "typ": "at+jwt", "kid": "es-1", "crit": ["exp"]}, "header"),
        ({"alg": "ES256", "typ": "at+jwt", "kid": "unknown"}, "kid"),
        ({"alg": "ES256", "typ": "at+jwt"}, "kid"),
    ],
)
def test_the_header_is_checked_before_the_signature(es256, keys, header, reason):
    _, body, signature = signed(es256).split(".")
    assert refused(f"{b64(header)}.{body}.{signature}", keys).reason == reason


def test_application_at_jwt_typ_is_accepted(es256, keys):
    header = {"alg": "ES256", "typ": "application/at+jwt", "kid": "es-1"}
    retyped = jwt.encode(claims(), es256.private, algorithm="ES256", headers=header)
    assert json.loads(base64.urlsafe_b64decode(retyped.split(".")[0] + "=="))["typ"] == "application/at+jwt"
    assert verify(retyped, keys).jti == "jti-1"


def test_alg_none_and_hmac_with_the_public_key_are_refused(es256, keys):
    assert refused(unsigned(claims(), typ="at+jwt", kid="es-1"), keys).reason == "header"
    assert refused(hs256_with_public_key(es256, claims(), typ="at+jwt"), keys).reason == "header"


@pytest.mark.parametrize(
    "token",
    ["opaque-token", "a.b", "a.b.c.d", "eyJ" + "x" * (MAX_TOKEN_LENGTH - 6) + ".e30.sig", "!!!.e30.sig"],
)
def test_what_is_not_a_compact_jws_is_malformed(keys, token):
    error = refused(token, keys)
    assert error.reason == "malformed"
    assert str(error) in ("The access token is not a JWT.", "The access token's header is not strict base64url JSON.")


def test_a_duplicate_header_member_is_malformed(es256, keys):
    _, body, signature = signed(es256).split(".")
    head = base64.urlsafe_b64encode(b'{"alg":"ES256","alg":"ES256","typ":"at+jwt","kid":"es-1"}').rstrip(b"=")
    assert refused(f"{head.decode()}.{body}.{signature}", keys).reason == "malformed"


def test_from_jwks_skips_keys_it_must_not_use(es256):
    small_rsa = make_key("RS256", kid="rs-small")
    small_rsa.private = rsa_keys.generate_private_key(public_exponent=65537, key_size=1024)
    p384 = make_key("ES384", kid="es-384")
    jwks = {
        "keys": [
            es256.public_jwk,
            {**es256.public_jwk, "kid": "enc", "use": "enc"},
            {**es256.public_jwk, "kid": "private", "d": "AAAA"},
            {**es256.public_jwk, "kid": "hs", "alg": "HS256"},
            {**es256.public_jwk, "kid": ""},
            {k: v for k, v in es256.public_jwk.items() if k != "kid"},
            small_rsa.public_jwk,
            p384.public_jwk,
            {"kty": "oct", "kid": "oct", "k": "c2VjcmV0"},
            "not a key",
            {**make_key("ES256").public_jwk, "kid": "es-1"},  # a second es-1: the first one wins
        ]
    }
    keys = KeySet.from_jwks(jwks)
    assert keys.kids == frozenset({"es-1"}) and len(keys) == 1 and "es-1" in keys
    assert verify(signed(es256), keys).kid == "es-1"


def test_from_jwks_reads_at_most_twenty_keys_and_refuses_a_document_without_keys():
    made = [make_key("ES256", kid=f"k{i}") for i in range(21)]
    assert len(KeySet.from_jwks({"keys": [key.public_jwk for key in made]})) == 20
    for document in ({}, {"keys": {}}, "[]", b'{"keys": null}'):
        with pytest.raises(ValueError, match="not a JWK Set: no keys list"):
            KeySet.from_jwks(document)


def test_looks_like_jwt_tells_an_opaque_token_apart():
    assert looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.e30.sig")
    assert not looks_like_jwt("A" * 43)
    assert not looks_like_jwt("eyJhbGciOiJFUzI1NiJ9.e30")
