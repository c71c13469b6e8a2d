"""Benchmark: the token endpoint's cost per client authentication method and for an ID-JAG.

One process, Django test client (no network), the reference site on a scratch database. Cases,
all the ``client_credentials`` grant unless named otherwise, each request with a fresh assertion
(a new ``jti``) so every one is accepted:

* ``client_secret_basic`` (baseline) — the secret in the ``Authorization`` header;
* ``private_key_jwt ES256`` / ``RS256`` — a client assertion checked against inline ``jwks``
  (signature, claims, ``jti`` row written);
* ``id-jag (basic + ES256)`` — the jwt-bearer grant with an ID-JAG from a trusted IdP.

Assertions are signed before the timed call (the client's cost is not the server's). Prints
req/s, median, p95 and each median as a ratio of the baseline's, measured side by side.

    .venv/bin/python bench/bench_client_auth.py --n 300
"""

from __future__ import annotations

import argparse
import base64
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import run_cases, setup_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=300)
    args = parser.parse_args()
    setup_django()

    import jwt
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client, override_settings
    from jwt.algorithms import ECAlgorithm, RSAAlgorithm
    from oauth2_provider.models import get_application_model

    from mcp_oauth.models import ClientProfile, EnterpriseIdentity, EnterpriseIdentityProvider
    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    override_settings(
        MCP_OAUTH={**settings.MCP_OAUTH, "THROTTLE_RATES": {"token": None}},
        OAUTH2_PROVIDER={**settings.OAUTH2_PROVIDER},
    ).enable()
    resource = ensure_default_resource()
    issuer = "http://testserver"
    Application = get_application_model()

    def machine(name: str, jwks=None):
        app = Application(name=name, client_type="confidential", authorization_grant_type="client-credentials")
        secret = app.client_secret
        app.save()
        if jwks is not None:
            ClientProfile.objects.create(application=app, jwks=jwks)
        return app, secret

    ec_key = ec.generate_private_key(ec.SECP256R1())
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ec_jwk = {**ECAlgorithm.to_jwk(ec_key.public_key(), as_dict=True), "kid": "e"}
    rsa_jwk = {**RSAAlgorithm.to_jwk(rsa_key.public_key(), as_dict=True), "kid": "r"}
    secret_app, secret = machine("secret")
    es_app, _ = machine("es", {"keys": [ec_jwk]})
    rs_app, _ = machine("rs", {"keys": [rsa_jwk]})
    jag_app, jag_secret = machine("jag")
    idp = EnterpriseIdentityProvider.objects.create(name="idp", issuer="https://idp.bench", jwks={"keys": [ec_jwk]})
    idp.allowed_clients.add(jag_app)
    idp.allowed_resources.add(resource)
    user = get_user_model().objects.create_user("bench-user", password="x")
    EnterpriseIdentity.objects.create(provider=idp, subject="S", user=user)

    client = Client()
    basic = "Basic " + base64.b64encode(f"{secret_app.client_id}:{secret}".encode()).decode()
    jag_basic = "Basic " + base64.b64encode(f"{jag_app.client_id}:{jag_secret}".encode()).decode()
    count = args.n + 20

    def claims(**extra):
        now = int(time.time())
        return {"iat": now, "exp": now + 600, "jti": uuid.uuid4().hex, **extra}

    def assertions(app, key, alg, kid):
        c = {"iss": app.client_id, "sub": app.client_id, "aud": issuer}
        return iter([jwt.encode(claims(**c), key, algorithm=alg, headers={"kid": kid}) for _ in range(count)])

    es_iter, rs_iter = assertions(es_app, ec_key, "ES256", "e"), assertions(rs_app, rsa_key, "RS256", "r")
    jag_claims = {
        "iss": idp.issuer,
        "sub": "S",
        "aud": issuer,
        "resource": resource.uri,
        "client_id": jag_app.client_id,
    }
    jag_iter = iter(
        [
            jwt.encode(claims(**jag_claims), ec_key, algorithm="ES256", headers={"kid": "e", "typ": "oauth-id-jag+jwt"})
            for _ in range(count)
        ]
    )
    assertion_type = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

    def ok(response):
        assert response.status_code == 200, response.content
        return response

    cases = {
        "client_secret_basic": lambda: ok(
            client.post("/oauth/token", {"grant_type": "client_credentials"}, HTTP_AUTHORIZATION=basic)
        ),
        "private_key_jwt ES256": lambda: ok(
            client.post(
                "/oauth/token",
                {
                    "grant_type": "client_credentials",
                    "client_assertion_type": assertion_type,
                    "client_assertion": next(es_iter),
                },
            )
        ),
        "private_key_jwt RS256": lambda: ok(
            client.post(
                "/oauth/token",
                {
                    "grant_type": "client_credentials",
                    "client_assertion_type": assertion_type,
                    "client_assertion": next(rs_iter),
                },
            )
        ),
        "id-jag (basic + ES256)": lambda: ok(
            client.post(
                "/oauth/token",
                {"grant_type": "urn:ietf:params:oauth:grant-type:jwt-bearer", "assertion": next(jag_iter)},
                HTTP_AUTHORIZATION=jag_basic,
            )
        ),
    }
    print(f"token endpoint, {args.n} requests per case ({settings.DATABASES['default']['ENGINE'].rsplit('.', 1)[-1]})")
    run_cases(cases, args.n, warmup=10, baseline="client_secret_basic")


if __name__ == "__main__":
    main()
