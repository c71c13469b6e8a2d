"""Helpers for organization tests: organizations, members, per-organization endpoints, the consent
page's organization choice played with Django's test client."""

from __future__ import annotations

import hashlib
from urllib.parse import urlencode

from mcp_oauth.models import Organization, OrganizationMembership, ProtectedResource, TokenOrganization
from tests.support.oauth_helpers import authorize_params, hidden_fields, pkce_pair, redirect_query


def make_organization(slug: str, name: str | None = None, **policy) -> Organization:
    return Organization.objects.create(slug=slug, name=name or slug.title(), **policy)


def add_member(user, organization: Organization, role: str = "member") -> OrganizationMembership:
    return OrganizationMembership.objects.create(organization=organization, user=user, role=role)


def organization_endpoint(organization: Organization, base: str = "http://testserver") -> ProtectedResource:
    """The organization's own MCP endpoint (a protected resource whose ``organization`` is set); the
    row ``ORGANIZATION_ENDPOINTS`` already made for it when ``BASE_URL`` is ``base``."""
    resource, _ = ProtectedResource.objects.update_or_create(
        uri=f"{base}/mcp/o/{organization.slug}",
        defaults={"name": f"{organization.name} MCP", "organization": organization},
    )
    return resource


def checksum(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def token_organization_id(value: str) -> int | None:
    """The organization a token value (or code) is bound to by its TokenOrganization row, or None."""
    return (
        TokenOrganization.objects.filter(token_checksum=checksum(value))
        .values_list("organization_id", flat=True)
        .first()
    )


def consent_page(client, app, **extra):
    """GET the authorization endpoint: ``(page response, params, verifier)``."""
    verifier, challenge = pkce_pair()
    params = authorize_params(app, challenge, **extra)
    return client.get("/oauth/authorize?" + urlencode(params)), params, verifier


def answer(client, page, params, organization=None, allow: bool = True):
    """POST the consent form of ``page`` choosing ``organization`` (a value, a list of values, or None)."""
    form = hidden_fields(page.content.decode())
    form.pop("organization", None)
    if allow:
        form["allow"] = "Authorize"
    else:
        form.pop("allow", None)
    data = {k: v for k, v in form.items()}
    if organization is not None:
        data["organization"] = organization if isinstance(organization, list) else str(organization)
    return client.post("/oauth/authorize?" + urlencode(params), data)


def code_for(client, app, organization=None, **extra) -> tuple[str, str]:
    """Authorize ``app`` acting for ``organization`` (an Organization, or None): ``(code, verifier)``."""
    page, params, verifier = consent_page(client, app, **extra)
    assert page.status_code == 200, (page.status_code, page.content[:400])
    response = answer(client, page, params, organization.pk if organization is not None else None)
    return redirect_query(response)["code"], verifier
