"""In Chromium: an administrator adds an enterprise identity provider (ID-JAG issuer) in the admin.

The add page's filter widgets (allowed clients and resources) are driven as a person would;
the saved provider has the chosen client, resource, keys and policy.
"""

from __future__ import annotations

import asyncio

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_application_model

from mcp_oauth.models import EnterpriseIdentityProvider, ProtectedResource
from tests.e2e.test_python_sdk import live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, same_origin_posts, shot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-browser"


def test_add_enterprise_idp_in_chromium(live, chromium_executable, request):
    get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)
    Application = get_application_model()
    app = Application.objects.create(
        name="Chat client", client_type="confidential", authorization_grant_type="client-credentials"
    )
    resource = ProtectedResource.objects.default()

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/mcp_oauth/enterpriseidentityprovider/add/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            await page.fill("#id_name", "Acme SSO")
            await page.fill("#id_issuer", "https://acme.idp.example")
            await page.fill("#id_jwks_uri", "https://acme.idp.example/oauth2/v1/keys")
            await page.fill("#id_algorithms", "RS256")
            await page.select_option("#id_allowed_clients_from", str(app.pk))
            await page.click("#id_allowed_clients_add")
            await page.select_option("#id_allowed_resources_from", str(resource.pk))
            await page.click("#id_allowed_resources_add")
            await page.select_option("#id_user_policy", "match_email")
            await shot(page, "admin-enterprise-idp-add")
            async with page.expect_navigation():
                await page.click('input[name="_save"]')
            message = await page.inner_text(".messagelist")
            return chromium, message

    chromium, message = asyncio.run(scenario())
    assert "was added successfully" in message
    idp = EnterpriseIdentityProvider.objects.get(issuer="https://acme.idp.example")
    assert idp.name == "Acme SSO" and idp.jwks_uri == "https://acme.idp.example/oauth2/v1/keys"
    assert idp.algorithm_list == ["RS256"] and idp.user_policy == "match_email" and idp.enabled
    assert list(idp.allowed_clients.all()) == [app] and list(idp.allowed_resources.all()) == [resource]
    posts = same_origin_posts(chromium, live.base)
    assert len(posts) == 2 and all(p["status"] == 302 for p in posts), posts
