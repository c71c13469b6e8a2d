"""Hostile JSON inside signed tokens (issue 28): every token the servers verify is read by one
strict reader (``mcp_oauth.shared.strict_json``).

Each attack is a correctly *signed* JWT (the signer's real key) whose header or claims are not
strict JSON or carry a claim no query should see: ``NaN``/``Infinity``/``1e400``/``-1``/``true`` in
``exp``/``iat``/``nbf``, a duplicate ``exp``, NUL and control characters in ``sub``/``email``/``iss``/
``jti``/``htu``. Each is refused with the error its spec names, never a 500, never accepted:

* ID-JAG (jwt-bearer grant): ``invalid_grant`` (400; RFC 7521 §5.2, RFC 6749 §5.2);
* ``private_key_jwt`` client assertion: ``invalid_client`` (401; RFC 7523 §3.2);
* DPoP proof at the token endpoint: ``invalid_dpop_proof`` (400), at ``/mcp`` in both MCP eras
  (2026-07-28 stateless, 2025-11-25 session): 401 with ``invalid_dpop_proof`` (RFC 9449 §5, §7.1).

Run on SQLite and on PostgreSQL (``DATABASE_URL=postgres://…``): a NUL reaching a query is a
PostgreSQL error.
"""

from __future__ import annotations

import json
import secrets
import time

import jwt
import pytest
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import AuditEvent, ClientProfile, EnterpriseIdentityProvider
from mcp_oauth.shared import strict_json
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
from tests.mcp_oauth.dpop.test_proof import INIT, MCP_URL, TOKEN_URL, challenge_error, exchange, ping
from tests.support.dpop_helpers import DPoPKey, b64url
from tests.support.jwt_keys import claims, make_key

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

#: Raw JSON values (as they appear in the payload text) that are no sane NumericDate.
BAD_DATES = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "1e400": "1e400",
    "-1": "-1",
    "true": "true",
    "1e300": "1e300",
    "string": '"1893456000"',
    "null": "null",
}


def raw_payload(values: dict, replace: dict[str, str] | None = None, append: str = "") -> bytes:
    """``values`` as JSON text with each member of ``replace`` given as raw JSON text (``NaN``)
    and ``append`` (``, "exp": 1``) written before the closing brace."""
    marked = {**values, **{name: f"__raw_{name}__" for name in replace or {}}}
    text = json.dumps(marked)
    for name, raw in (replace or {}).items():
        text = text.replace(f'"__raw_{name}__"', raw)
    return (text[:-1] + append + "}").encode()


def sign_raw(private, alg: str, header: dict, payload: bytes) -> str:
    """A compact JWS over the exact ``payload`` bytes (PyJWT's JWS layer signs them as given)."""
    return jwt.api_jws.PyJWS().encode(payload, private, algorithm=alg, headers=header)


# --- the reader itself ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    ['{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1e400}', '{"a": 1, "a": 2}', '\ufeff{"a": 1}'],
)
def test_the_reader_refuses_json_that_is_not_json(text):
    with pytest.raises(strict_json.StrictJSONError):
        strict_json.loads(text)


@pytest.mark.parametrize(
    "members",
    [
        {"exp": float("nan")},
        {"exp": True},
        {"iat": -1},
        {"nbf": strict_json.MAX_NUMERIC_DATE},
        {"sub": "a\x00b"},
        {"iss": "https://idp.example\n"},
        {"aud": ["ok", "no\x1f"]},
        {"jti": "j" * 257},
        {"email": "x\x7f@example.com"},
        {"htu": "https://a.example/\x85"},
        {"other": "\ud800"},
        {"sub": 7},
    ],
)
def test_the_reader_refuses_members(members):
    with pytest.raises(strict_json.StrictJSONError):
        strict_json.check_jose_members(members)


@pytest.mark.parametrize(
    ("text", "accepted"),
    [
        (b'{"a": "\\u0000"}', False),
        (b'{"a": "\\ud800"}', False),
        (b'{"a": "\\udc00x"}', False),
        (b'{"\\u0000": 1}', False),
        (b'{"a": "\\\\u0000"}', True),  # an escaped backslash, then the text "u0000"
        (b'{"a": "\\u00e9 \\ud83d\\ude00"}', True),  # a paired surrogate is one character
        ('{"a": "é 😀"}'.encode(), True),
        (b'{"a": "\xed\xa0\x80"}', False),  # a surrogate encoded in UTF-8 is not UTF-8
        (b'{"a": "x\x00"}', False),  # a raw control character is not JSON
    ],
)
def test_segments_with_escapes(text, accepted):
    segment = b64url(text)
    if accepted:
        assert isinstance(strict_json.jose_object(segment), dict)
    else:
        with pytest.raises(strict_json.StrictJSONError):
            strict_json.jose_object(segment)


@pytest.mark.parametrize("segment", ["eyJhIjoxfQ==", "eyJhIjox fQ", "eyJhIjoxf", "e+JhIjoxfQ", ""])
def test_segments_that_are_not_base64url(segment):
    with pytest.raises(strict_json.StrictJSONError):
        strict_json.jose_object(segment)


def test_the_reader_keeps_sane_members():
    members = {"exp": 1_900_000_000.5, "iat": 0, "aud": ["a", "b"], "sub": "ü-ok", "x5c": ["A" * 2000]}
    assert strict_json.check_jose_members(members) == members


# --- ID-JAG (jwt-bearer grant) -------------------------------------------------------------------


def _id_jag_claims(app, resource_uri, **values):
    base = {"iss": IDP, "sub": "U019488227", "aud": ISSUER, "resource": resource_uri, "client_id": app.client_id}
    return claims(**{**base, "scope": "mcp", **values})


def _id_jag_raw(key, payload: bytes) -> str:
    return sign_raw(key.private, key.alg, {"kid": key.kid, "typ": TYP}, payload)


def _assert_refused_id_jag(response):
    assert_error(response, "invalid_grant")
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.ASSERTION_REFUSED).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("claim", ["exp", "iat", "nbf"])
@pytest.mark.parametrize("value", sorted(BAD_DATES))
def test_id_jag_with_a_bad_date_is_invalid_grant(client, provider, chat_client, idp_key, resource, claim, value):
    app, secret = chat_client
    payload = raw_payload(_id_jag_claims(app, resource.uri), {claim: BAD_DATES[value]})
    _assert_refused_id_jag(redeem(client, app, secret, _id_jag_raw(idp_key, payload)))


@pytest.mark.django_db
def test_id_jag_with_a_duplicate_exp_is_invalid_grant(client, provider, chat_client, idp_key, resource):
    app, secret = chat_client
    # the first exp is expired, the second (the one a lenient parser keeps) is fine
    values = _id_jag_claims(app, resource.uri, exp=1_000_000_300)
    payload = raw_payload(values, append=f', "exp": {int(time.time()) + 300}')
    _assert_refused_id_jag(redeem(client, app, secret, _id_jag_raw(idp_key, payload)))


@pytest.mark.django_db
def test_id_jag_with_a_duplicate_header_member_is_invalid_grant(client, provider, chat_client, idp_key, resource):
    app, secret = chat_client
    good = idp_key.sign(_id_jag_claims(app, resource.uri), typ=TYP)
    _header, payload, signature = good.split(".")
    header = b64url(json.dumps({"alg": "ES256", "typ": "JWT", "kid": idp_key.kid}).encode()[:-1] + b', "typ": "x"}')
    _assert_refused_id_jag(redeem(client, app, secret, f"{header}.{payload}.{signature}"))


@pytest.mark.django_db
@pytest.mark.parametrize("claim", ["sub", "email", "iss", "jti", "client_id", "resource"])
@pytest.mark.parametrize("char", ["\x00", "\x01", "\n"])
def test_id_jag_with_a_control_character_is_invalid_grant(
    client, provider, chat_client, idp_key, resource, user, claim, char
):
    provider.user_policy = EnterpriseIdentityProvider.UserPolicy.MATCH_EMAIL  # the email reaches a query
    provider.save()
    app, secret = chat_client
    values = _id_jag_claims(app, resource.uri, email=user.email, email_verified=True)
    values[claim] = values[claim][:3] + char + values[claim][3:]
    _assert_refused_id_jag(redeem(client, app, secret, idp_key.sign(values, typ=TYP)))


@pytest.mark.django_db
def test_id_jag_with_an_overlong_sub_is_invalid_grant(client, provider, chat_client, idp_key, resource):
    app, secret = chat_client
    assertion = idp_key.sign(_id_jag_claims(app, resource.uri, sub="U" * 256), typ=TYP)
    _assert_refused_id_jag(redeem(client, app, secret, assertion))


@pytest.mark.django_db
def test_id_jag_with_a_fractional_date_is_still_accepted(client, provider, chat_client, idp_key, resource):
    """NumericDate may be a non-integer (RFC 7519 §2): strictness does not refuse it."""
    app, secret = chat_client
    now = time.time()
    assertion = idp_key.sign(_id_jag_claims(app, resource.uri, iat=now - 1.5, exp=now + 299.25), typ=TYP)
    assert redeem(client, app, secret, assertion).status_code == 200


# --- private_key_jwt client assertions -----------------------------------------------------------


@pytest.fixture
def jwt_client(resource):
    from oauth2_provider.models import get_application_model

    key = make_key("RS256")
    app = get_application_model().objects.create(
        name="machine", client_type="confidential", authorization_grant_type="client-credentials"
    )
    ClientProfile.objects.create(application=app, jwks=key.jwks)
    return app, key


def _cc(client, assertion, **extra):
    data = {"grant_type": "client_credentials", "client_assertion_type": ASSERTION_TYPE, "client_assertion": assertion}
    return client.post("/oauth/token", {**data, **extra})


def _assert_invalid_client(response):
    assert response.status_code == 401, (response.status_code, response.content)
    assert response.json()["error"] == "invalid_client"
    assert not get_access_token_model().objects.exists()


def _client_claims(app, **values):
    return claims(**{"iss": app.client_id, "sub": app.client_id, "aud": ISSUER, **values})


@pytest.mark.django_db
def test_a_clean_client_assertion_still_works(client, jwt_client):
    app, key = jwt_client
    assert _cc(client, key.sign(_client_claims(app)), scope="mcp").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("claim", ["exp", "iat", "nbf"])
@pytest.mark.parametrize("value", sorted(BAD_DATES))
def test_client_assertion_with_a_bad_date_is_invalid_client(client, jwt_client, claim, value):
    app, key = jwt_client
    payload = raw_payload(_client_claims(app), {claim: BAD_DATES[value]})
    _assert_invalid_client(_cc(client, sign_raw(key.private, key.alg, {"kid": key.kid}, payload)))


@pytest.mark.django_db
def test_client_assertion_with_a_duplicate_exp_is_invalid_client(client, jwt_client):
    app, key = jwt_client
    payload = raw_payload(_client_claims(app, exp=1_000_000_300), append=f', "exp": {int(time.time()) + 300}')
    _assert_invalid_client(_cc(client, sign_raw(key.private, key.alg, {"kid": key.kid}, payload)))


@pytest.mark.django_db
@pytest.mark.parametrize("claim", ["sub", "iss", "jti"])
@pytest.mark.parametrize("char", ["\x00", "\x1b"])
def test_client_assertion_with_a_control_character_is_invalid_client(client, jwt_client, claim, char):
    app, key = jwt_client
    values = _client_claims(app)
    values[claim] = values[claim] + char
    _assert_invalid_client(_cc(client, key.sign(values)))


@pytest.mark.django_db
@pytest.mark.parametrize("endpoint", ["/oauth/revoke", "/oauth/introspect"])
@pytest.mark.parametrize("attack", ["exp NaN", "iat Infinity", "duplicate exp", "NUL in sub"])
def test_revocation_and_introspection_refuse_hostile_client_assertions(client, jwt_client, endpoint, attack):
    app, key = jwt_client
    token = _cc(client, key.sign(_client_claims(app)), scope="mcp").json()["access_token"]
    values = _client_claims(app)
    payloads = {
        "exp NaN": raw_payload(values, {"exp": "NaN"}),
        "iat Infinity": raw_payload(values, {"iat": "Infinity"}),
        "duplicate exp": raw_payload({**values, "exp": 1_000_000_300}, append=f', "exp": {int(time.time()) + 300}'),
        "NUL in sub": raw_payload(values, {"sub": json.dumps(app.client_id + "\x00")}),
    }
    assertion = sign_raw(key.private, key.alg, {"kid": key.kid}, payloads[attack])
    data = {"token": token, "client_assertion_type": ASSERTION_TYPE, "client_assertion": assertion}
    response = client.post(endpoint, data)
    assert response.status_code == 401, response.content
    assert response.json()["error"] == "invalid_client"
    assert get_access_token_model().objects.count() == 1  # not revoked


@pytest.mark.django_db
def test_client_assertion_with_nul_in_the_client_id_parameter_is_not_a_500(client, jwt_client):
    app, key = jwt_client
    response = _cc(client, key.sign(_client_claims(app)), client_id=app.client_id + "\x00")
    assert response.status_code == 400
    assert response.json() == {
        "error": "invalid_request",
        "error_description": "Parameters must be text without NUL characters or unpaired surrogates.",
    }


# --- DPoP proofs: the token endpoint and /mcp in both eras -------------------------------------------


def _proof(key: DPoPKey, method: str, url: str, access_token: str | None = None, **raw: str) -> str:
    import hashlib

    values: dict = {"jti": secrets.token_urlsafe(16), "htm": method, "htu": url, "iat": int(time.time())}
    if access_token is not None:
        values["ath"] = b64url(hashlib.sha256(access_token.encode()).digest())
    append = raw.pop("_append", "")
    payload = raw_payload(values, raw, append)
    return sign_raw(key.private, key.alg, {"typ": "dpop+jwt", "jwk": key.jwk}, payload)


def _proof_attacks(key: DPoPKey, method: str, url: str, token: str | None) -> dict[str, str]:
    attacks = {f"iat {name}": _proof(key, method, url, token, iat=raw) for name, raw in BAD_DATES.items()}
    # a stale iat first, a fresh one second: a parser keeping the last would accept it
    attacks["duplicate iat"] = _proof(key, method, url, token, iat="1000000000", _append=f', "iat": {int(time.time())}')
    attacks["jti with NUL"] = _proof(key, method, url, token, jti='"a\\u0000b"')
    attacks["jti with a control"] = _proof(key, method, url, token, jti='"a\\u0007b"')
    attacks["htu with NUL"] = _proof(key, method, url, token, htu=json.dumps(url + "\x00"))
    attacks["htm with a newline"] = _proof(key, method, url, token, htm=json.dumps(method + "\n"))
    attacks["lone surrogate in jti"] = _proof(key, method, url, token, jti='"\\ud800"')
    return attacks


ATTACKS = sorted(_proof_attacks(DPoPKey(), "POST", TOKEN_URL, None))


@pytest.mark.django_db
@pytest.mark.parametrize("attack", ATTACKS)
def test_token_endpoint_refuses_hostile_proofs(logged_in, public_app, key, attack):
    response = exchange(logged_in, public_app, _proof_attacks(key, "POST", TOKEN_URL, None)[attack])
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_dpop_proof"
    assert not get_access_token_model().objects.exists()


@pytest.mark.django_db
@pytest.mark.parametrize("attack", ATTACKS)
def test_mcp_2026_07_28_refuses_hostile_proofs(logged_in, key, dpop_pair, attack):
    token = dpop_pair["access_token"]
    response = ping(logged_in, token, _proof_attacks(key, "POST", MCP_URL, token)[attack])
    assert response.status_code == 401, response.content
    assert challenge_error(response) == "invalid_dpop_proof"
    assert response.json()["error"] == "invalid_dpop_proof"


@pytest.mark.django_db
@pytest.mark.parametrize("attack", ATTACKS)
def test_mcp_2025_11_25_refuses_hostile_proofs(logged_in, key, dpop_pair, attack):
    token = dpop_pair["access_token"]
    headers = {"HTTP_AUTHORIZATION": f"DPoP {token}", "HTTP_ACCEPT": "application/json, text/event-stream"}
    proof = _proof_attacks(key, "POST", MCP_URL, token)[attack]
    response = logged_in.post("/mcp", INIT, content_type="application/json", HTTP_DPOP=proof, **headers)
    assert response.status_code == 401, response.content
    assert challenge_error(response) == "invalid_dpop_proof"


@pytest.mark.django_db
@pytest.mark.parametrize("attack", ["iat NaN", "iat 1e400", "duplicate iat", "jti with NUL", "htu with NUL"])
def test_mcp_2025_11_25_session_requests_refuse_hostile_proofs(logged_in, key, dpop_pair, attack):
    """After initialize, each request of the session (Mcp-Session-Id) is checked the same way."""
    token = dpop_pair["access_token"]
    headers = {"HTTP_AUTHORIZATION": f"DPoP {token}", "HTTP_ACCEPT": "application/json, text/event-stream"}
    init = logged_in.post(
        "/mcp", INIT, content_type="application/json", HTTP_DPOP=_proof(key, "POST", MCP_URL, token), **headers
    )
    assert init.status_code == 200, init.content
    session = {"HTTP_MCP_SESSION_ID": init["Mcp-Session-Id"], "HTTP_MCP_PROTOCOL_VERSION": "2025-11-25", **headers}
    tools_list = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    good = logged_in.post(
        "/mcp", tools_list, content_type="application/json", HTTP_DPOP=_proof(key, "POST", MCP_URL, token), **session
    )
    assert good.status_code == 200, good.content
    proof = _proof_attacks(key, "POST", MCP_URL, token)[attack]
    response = logged_in.post("/mcp", tools_list, content_type="application/json", HTTP_DPOP=proof, **session)
    assert response.status_code == 401, response.content
    assert challenge_error(response) == "invalid_dpop_proof"


@pytest.mark.django_db
def test_a_raw_signed_clean_proof_is_accepted_in_both_eras(logged_in, key, dpop_pair):
    """The attacks above differ from this accepted proof only in the hostile member."""
    token = dpop_pair["access_token"]
    assert ping(logged_in, token, _proof(key, "POST", MCP_URL, token)).status_code == 200
    headers = {"HTTP_AUTHORIZATION": f"DPoP {token}", "HTTP_ACCEPT": "application/json, text/event-stream"}
    response = logged_in.post(
        "/mcp", INIT, content_type="application/json", HTTP_DPOP=_proof(key, "POST", MCP_URL, token), **headers
    )
    assert response.status_code == 200, response.content


@pytest.fixture
def key():
    return DPoPKey("ES256")


@pytest.fixture
def logged_in(client, user, resource):
    client.force_login(user)
    return client


@pytest.fixture
def dpop_pair(logged_in, public_app, key):
    response = exchange(logged_in, public_app, key.proof("POST", TOKEN_URL))
    assert response.status_code == 200, response.content
    return response.json()


@pytest.mark.django_db
@pytest.mark.parametrize("policy", ["match_email", "create"])
def test_id_jag_with_an_email_longer_than_the_user_field_is_not_a_500(
    client, provider, chat_client, idp_key, resource, policy
):
    """A verified e-mail of 300 characters (within RFC 5321's 320 but beyond Django's 254-character
    field): refused or linked, never a database error on PostgreSQL."""
    provider.user_policy = policy
    provider.save()
    app, secret = chat_client
    email = "a" * 287 + "@acme.example"
    assertion = idp_key.sign(_id_jag_claims(app, resource.uri, sub="U9", email=email, email_verified=True), typ=TYP)
    response = redeem(client, app, secret, assertion)
    assert response.status_code == 400, response.content
    assert response.json()["error"] == "invalid_grant"
