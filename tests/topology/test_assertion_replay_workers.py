"""A JWT assertion is used once across worker processes: a ``private_key_jwt`` client assertion
accepted by one process is a replay (``invalid_client``) at another, and an ID-JAG redeemed at one is
``invalid_grant`` at the other. Presented to both at the same moment, exactly one process accepts it.

Server A is the live ASGI server of the test process; server B a separate uvicorn process of the
same project on the same database (SQLite file or PostgreSQL).
"""

from __future__ import annotations

import os
import threading

import httpx2
import pytest
from oauth2_provider.models import get_application_model

from mcp_oauth.models import ClientProfile, EnterpriseIdentity, EnterpriseIdentityProvider
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.jwt_keys import claims, make_key
from tests.support.live import free_port, run_asgi_server
from tests.support.topology import database_url, start_uvicorn

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
IDP = "https://acme.idp.example"


def race(http: httpx2.Client, urls: dict[str, str], body: dict, auth) -> dict[str, int]:
    """POST ``body`` to every URL at the same moment; ``{name: status}``."""
    statuses: dict[str, int] = {}
    barrier = threading.Barrier(len(urls))

    def post(name: str) -> None:
        barrier.wait()
        statuses[name] = http.post(urls[name], data=body, **({"auth": auth} if auth else {})).status_code

    threads = [threading.Thread(target=post, args=(name,)) for name in urls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return statuses


def _worker(port: int, base: str):
    env = {**os.environ, "DATABASE_URL": database_url(), "MCP_BASE_URL": base, "PYTHONUNBUFFERED": "1"}
    env.pop("CELERY_BROKER_URL", None)
    return start_uvicorn(port, env)


def test_assertions_are_single_use_across_processes(settings, django_user_model):
    port_a, port_b = free_port(), free_port()
    base = f"http://127.0.0.1:{port_a}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    resource = ensure_default_resource()
    user = django_user_model.objects.create_user("dana", "dana@example.com", "pw")
    client_key, idp_key = make_key("ES256"), make_key("RS256")
    Application = get_application_model()
    app = Application(name="m", client_type="confidential", authorization_grant_type="client-credentials")
    secret = app.client_secret
    app.save()
    ClientProfile.objects.create(application=app, jwks=client_key.jwks)
    idp = EnterpriseIdentityProvider.objects.create(name="Acme", issuer=IDP, jwks=idp_key.jwks)
    idp.allowed_clients.add(app)
    idp.allowed_resources.add(resource)
    EnterpriseIdentity.objects.create(provider=idp, subject="U1", user=user)
    urls = {"A": f"{base}/oauth/token", "B": f"http://127.0.0.1:{port_b}/oauth/token"}

    def client_assertion() -> dict:
        assertion = client_key.sign(claims(iss=app.client_id, sub=app.client_id, aud=base))
        return {
            "grant_type": "client_credentials",
            "client_assertion_type": ASSERTION_TYPE,
            "client_assertion": assertion,
        }

    def id_jag() -> dict:
        payload = claims(iss=IDP, sub="U1", aud=base, resource=resource.uri, client_id=app.client_id, scope="mcp")
        return {"grant_type": JWT_BEARER, "assertion": idp_key.sign(payload, typ="oauth-id-jag+jwt")}

    worker_b = _worker(port_b, base)
    try:
        from project.asgi import application

        with run_asgi_server(application, port_a), httpx2.Client(timeout=20) as http:
            auth = (app.client_id, secret)
            # Sequential: accepted by one process, a replay at the other.
            body = client_assertion()
            assert http.post(urls["A"], data=body).status_code == 200
            replay = http.post(urls["B"], data=body)
            assert replay.status_code == 401 and replay.json()["error"] == "invalid_client"
            grant = id_jag()
            assert http.post(urls["B"], data=grant, auth=auth).status_code == 200
            again = http.post(urls["A"], data=grant, auth=auth)
            assert again.status_code == 400 and again.json()["error"] == "invalid_grant"

            # Simultaneous: exactly one of the two processes accepts each assertion.
            for make in (client_assertion, id_jag) * 3:
                body = make()
                statuses = race(http, urls, body, auth if body["grant_type"] == JWT_BEARER else None)
                assert sorted(statuses.values())[0] == 200 and sorted(statuses.values())[1] in (400, 401), statuses
    finally:
        worker_b.terminate()
        worker_b.wait(timeout=10)
