"""A resource server in a process of its own that has no database: it holds the authorization
server's JWK Set and checks JWT access tokens (RFC 9068) with :mod:`mcp_oauth.shared.access_jwt`,
and refuses the revoked ones through the deny-list in Redis.

Run as ``python tests/support/jwt_resource_server.py``; configured by the environment:
``JWKS`` (the JWK Set document, JSON), ``ISSUER``, ``AUDIENCE``, ``REDIS_URL``, ``KEY_PREFIX``
(the site's cache ``KEY_PREFIX``). Its ``DATABASES`` points at a closed port: any query would fail.
Prints ``listening <port>`` once it serves ``GET /whoami`` on 127.0.0.1 (200 with the claims, or
401 with ``WWW-Authenticate: Bearer error="invalid_token"``).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from wsgiref.simple_server import WSGIRequestHandler, make_server

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

import django
from django.conf import settings

settings.configure(
    DATABASES={
        "default": {  # unreachable: nothing here may read a database
            "ENGINE": "django.db.backends.postgresql",
            "HOST": "127.0.0.1",
            "PORT": "1",
            "NAME": "none",
            "USER": "none",
            "CONNECT_TIMEOUT": 1,
        }
    },
    CACHES={
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["REDIS_URL"],
            "KEY_PREFIX": os.environ.get("KEY_PREFIX", ""),
        }
    },
    INSTALLED_APPS=[],
    USE_TZ=True,
)
django.setup()

from django.core.cache import cache  # noqa: E402

from mcp_oauth.shared.access_jwt import InvalidAccessToken, KeySet, verify_access_token  # noqa: E402

KEYS = KeySet.from_jwks(os.environ["JWKS"])
ISSUER = os.environ["ISSUER"]
AUDIENCE = os.environ["AUDIENCE"]
DENY_PREFIX = "mcp_oauth:jwt:deny:"


def app(environ, start_response):
    header = environ.get("HTTP_AUTHORIZATION", "")
    token = header[7:] if header[:7].lower() == "bearer " else ""
    try:
        claims = verify_access_token(token, keys=KEYS, issuer=ISSUER, audience=AUDIENCE)
        if cache.get(DENY_PREFIX + hashlib.sha256(token.encode()).hexdigest()) is not None:
            raise InvalidAccessToken("The access token was revoked.", "revoked")
    except InvalidAccessToken as refused:
        body = json.dumps({"error": "invalid_token", "error_description": str(refused), "reason": refused.reason})
        start_response(
            "401 Unauthorized",
            [("Content-Type", "application/json"), ("WWW-Authenticate", 'Bearer error="invalid_token"')],
        )
        return [body.encode()]
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps(claims.claims).encode()]


class _Quiet(WSGIRequestHandler):
    def log_message(self, format, *args):
        pass


if __name__ == "__main__":
    server = make_server("127.0.0.1", 0, app, handler_class=_Quiet)
    print(f"listening {server.server_port}", flush=True)
    server.serve_forever()
