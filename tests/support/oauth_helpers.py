"""Helpers that play an OAuth client and a browser against Django's test client."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
from urllib.parse import parse_qs, urlencode, urlsplit

REDIRECT_URI = "http://127.0.0.1/callback"


def pkce_pair() -> tuple[str, str]:
    """``(code_verifier, S256 code_challenge)`` (RFC 7636 §4.1-4.2)."""
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


def authorize_params(app, challenge: str, **extra) -> dict:
    params = {
        "response_type": "code",
        "client_id": app.client_id,
        "redirect_uri": REDIRECT_URI,
        "state": "st-" + secrets.token_hex(4),
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "scope": "mcp",
    }
    params.update(extra)
    return {k: v for k, v in params.items() if v is not None}


def hidden_fields(html: str) -> dict:
    fields = {}
    for match in re.finditer(r"<input[^>]*>", html):
        tag = match.group(0)
        name = re.search(r'name="([^"]+)"', tag)
        value = re.search(r'value="([^"]*)"', tag)
        if name:
            fields[name.group(1)] = (value.group(1) if value else "").replace("&amp;", "&").replace("&quot;", '"')
    return fields


def consent(client, params: dict, allow: bool = True):
    """GET the authorization endpoint then POST the consent form; return the final response."""
    page = client.get("/oauth/authorize?" + urlencode(params, doseq=True))
    assert page.status_code == 200, (page.status_code, page.get("Location"), page.content[:500])
    form = hidden_fields(page.content.decode())
    if allow:
        form["allow"] = "Authorize"
    else:
        form.pop("allow", None)
    return client.post("/oauth/authorize?" + urlencode(params, doseq=True), form)


def redirect_query(response) -> dict:
    assert response.status_code in (302, 303), (response.status_code, response.content[:300])
    location = response["Location"]
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


def get_code(client, app, **extra) -> tuple[str, str, dict]:
    """Run authorize + consent; return ``(code, verifier, redirect query)``."""
    verifier, challenge = pkce_pair()
    params = authorize_params(app, challenge, **extra)
    query = redirect_query(consent(client, params))
    return query["code"], verifier, query


def token_request(client, app, code: str, verifier: str, **extra):
    data = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT_URI,
        "client_id": app.client_id,
        "code_verifier": verifier,
    }
    data.update(extra)
    data = {k: v for k, v in data.items() if v is not None}
    return client.post("/oauth/token", data)


def basic(client_id: str, secret: str) -> str:
    """An ``Authorization: Basic`` value for client authentication (RFC 6749 §2.3.1)."""
    return "Basic " + base64.b64encode(f"{client_id}:{secret}".encode()).decode()


def first_pair(client, app) -> dict:
    """The token response of a fresh authorization code exchange by ``app`` (``client`` logged in)."""
    code, verifier, _ = get_code(client, app)
    response = token_request(client, app, code, verifier)
    assert response.status_code == 200, response.content
    return response.json()


def bearer_status(client, access_token: str) -> int:
    """The HTTP status of an MCP ``ping`` with ``access_token`` (401: the bearer check refused it)."""
    return client.post(
        "/mcp",
        data='{"jsonrpc":"2.0","id":1,"method":"ping"}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {access_token}",
        HTTP_ACCEPT="application/json, text/event-stream",
        HTTP_MCP_PROTOCOL_VERSION="2025-11-25",
    ).status_code


def bearer_works(client, access_token: str) -> bool:
    """Whether the resource server accepts ``access_token``."""
    return bearer_status(client, access_token) != 401


def live_code_tokens(base: str, user, key=None, name: str = "e2e client") -> tuple[dict, object]:
    """A new public client's token response from the live server at ``base``: the authorization
    code from the consent flow (Django's test client as ``user``, same database), exchanged at the
    live token endpoint, with a DPoP proof of ``key`` (a ``tests.support.dpop_helpers.DPoPKey``)
    when given. Returns ``(token response, application)``."""
    import httpx2
    from django.test import Client as DjangoClient
    from oauth2_provider.models import get_application_model

    Application = get_application_model()
    app = Application.objects.create(
        name=name,
        client_type=Application.CLIENT_PUBLIC,
        authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE,
        redirect_uris=REDIRECT_URI,
    )
    browser = DjangoClient(HTTP_HOST=base.split("//", 1)[1])
    browser.force_login(user)
    code, verifier, _ = get_code(browser, app)
    token_url = base + "/oauth/token"
    response = httpx2.post(
        token_url,
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": REDIRECT_URI,
            "client_id": app.client_id,
            "code_verifier": verifier,
        },
        headers={"DPoP": key.proof("POST", token_url)} if key else {},
    )
    assert response.status_code == 200, response.text
    return response.json(), app
