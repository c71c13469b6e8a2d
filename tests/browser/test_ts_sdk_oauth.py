"""In Chromium: the official MCP TypeScript SDK 2.x client does the OAuth while a real browser does the user's part.

``tests/js/oauth_client.mjs`` (``@modelcontextprotocol/client`` 2.4.0) prints the authorization URL
its ``OAuthClientProvider`` was given; Chromium opens it, fills the site's login form and clicks
Authorize; the redirect lands on the client's loopback listener (RFC 8252 §7.3), whose query goes
back to the SDK's ``finishAuth``. With the SDK's DPoP support (``dpop()`` → ``DpopSession``) at a
resource that requires DPoP, in both protocol eras.
"""

from __future__ import annotations

import asyncio

import pytest
from oauth2_provider.models import get_access_token_model

from mcp_oauth.models import DPoPBinding, ProtectedResource
from tests.e2e.test_python_sdk import PASSWORD, USERNAME, live  # noqa: F401 - live is a fixture
from tests.e2e.test_ts_sdk_oauth import ERAS, assert_era, auth_code_config, node, run_node, whoami_results  # noqa: F401
from tests.support.browser import (
    ChromiumUser,
    chromium_executable,  # noqa: F401 - fixture
    loopback,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    same_origin_posts,
)

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize("era", ERAS)
def test_typescript_sdk_dpop_flow_with_login_and_consent_in_chromium(
    node,
    live,
    loopback,
    chromium_executable,
    request,
    era,
):
    resource = ProtectedResource.objects.default()
    resource.dpop_required = True
    resource.save()
    seen: dict = {}

    def chromium_user(url: str) -> tuple[dict[str, str], list[str]]:
        async def scenario():
            async with open_chromium(chromium_executable, request.node.name) as chromium:
                user = ChromiumUser(await chromium.new_page(), USERNAME, PASSWORD, loopback)
                query = await user.authorize(url)
                seen["posts"] = same_origin_posts(chromium, live.base)
                return query, user.consent_pages

        return asyncio.run(scenario())

    config = auth_code_config(live, era, dpop=True, clientName="TypeScript SDK in Chromium")
    config["redirectUrl"] = loopback.redirect_uri
    report, authorizations = run_node(node, live.base, config, user_agent=chromium_user)

    assert_era(report, era)
    (result,) = whoami_results(report)
    assert result["user"] == USERNAME and result["resource"] == live.mcp_url
    (authorization,) = authorizations
    assert set(authorization["params"]) == {"code", "state", "iss"}
    assert 'id="client-name">TypeScript SDK in Chromium<' in authorization["consent_pages"][0]
    # the login POST and the consent POST, with the page's real Origin, both accepted
    assert [(p["origin"], p["status"] in (302, 303)) for p in seen["posts"]] == [(live.base, True)] * 2
    assert report["tokenTypes"] == ["DPoP"]
    token = get_access_token_model().objects.get(user__username=USERNAME)
    binding = DPoPBinding.objects.get(token_checksum=token.token_checksum)
    assert binding.jkt == report["dpopThumbprint"]
