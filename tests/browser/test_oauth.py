"""In Chromium: the official MCP Python SDK client does OAuth while a real browser does the user's part.

The SDK (mcp 2.3.0) registers (DCR) or presents a metadata document URL (CIMD); Chromium opens the
authorization URL, fills the site's login form, and clicks Authorize or Cancel on the consent page;
the answer lands on the client's loopback redirect listener (RFC 8252 §7.3), a real HTTP server
started by the test. Every form POST must carry the page's real ``Origin`` (not ``null``) and pass
Django's CSRF check: the ``Referrer-Policy`` is ``same-origin`` in the header and the ``<meta>`` tag.
"""

from __future__ import annotations

import asyncio

import httpx2
import pytest
from mcp import Client
from mcp.client.auth import AuthorizationCodeResult, OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import AuditEvent, Consent
from tests.e2e.test_python_sdk import (  # noqa: F401 - live is a fixture
    PASSWORD,
    USERNAME,
    MemoryStorage,
    assert_whoami,
    client_metadata,
    live,
    make_provider,
    session_run,
)
from tests.support.browser import (
    ChromiumUser,
    chromium_executable,  # noqa: F401 - fixture
    loopback,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
    same_origin_posts,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard  # noqa: F401 - fixtures

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def assert_real_origin_posts(chromium, base: str, expected: int) -> None:
    """Every POST the pages made to ``base`` carried ``Origin: <base>`` and none was refused."""
    posts = same_origin_posts(chromium, base)
    assert len(posts) == expected, posts
    for post in posts:
        assert post["origin"] == base, post
        assert post["status"] in (302, 303), post


def test_dcr_client_login_and_consent_in_chromium(live, loopback, chromium_executable, request):
    storage = MemoryStorage()
    metadata = client_metadata(live.port, client_name="Chromium DCR client", redirect_uri=loopback.redirect_uri)

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            user = ChromiumUser(page, USERNAME, PASSWORD, loopback, screenshots="dcr")
            seen = await session_run(live, make_provider(live, storage, user, metadata=metadata), "legacy")
            return chromium, user, seen

    chromium, user, seen = asyncio.run(scenario())

    client_id = storage.client_info.client_id
    assert_whoami(seen["whoami"][0], client_id)
    # The login page said which application asks, and for which site.
    (login_page,) = user.login_pages
    assert 'id="login-client">Chromium DCR client<' in login_page
    assert 'id="login-site">django-mcp-authz demo<' in login_page
    # The consent page: the client, registered dynamically, Authorize as the primary action.
    (consent_page,) = user.consent_pages
    assert 'id="client-name">Chromium DCR client<' in consent_page and 'id="client-dynamic"' in consent_page
    assert 'id="authorize" class="primary"' in consent_page
    # The login POST and the consent POST, both with a real Origin, both accepted.
    assert_real_origin_posts(chromium, live.base, 2)
    (answer,) = loopback.hits
    assert set(answer) == {"code", "state", "iss"} and answer["iss"] == live.base
    application = get_application_model().objects.get(client_id=client_id)
    assert application.registration_source == "dcr"
    assert get_access_token_model().objects.get(application=application, user__username=USERNAME).resource == [
        live.mcp_url
    ]
    assert Consent.objects.get(application=application, user__username=USERNAME).revoked_at is None


def test_cancel_sends_access_denied_to_the_client_loopback_listener(live, loopback, chromium_executable, request):
    """Cancel on the consent page: ``error=access_denied`` with the client's ``state`` and ``iss``
    reaches the client's loopback listener; the SDK gets no code and no token is issued."""
    storage = MemoryStorage()
    metadata = client_metadata(live.port, client_name="Chromium cancelled client", redirect_uri=loopback.redirect_uri)
    pending: dict[str, str] = {}

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            user = ChromiumUser(page, USERNAME, PASSWORD, loopback, approve=False)

            async def redirect_handler(url: str) -> None:
                pending["url"] = url

            async def callback_handler() -> AuthorizationCodeResult:
                params = await user.authorize(pending["url"])
                return AuthorizationCodeResult(
                    code=params.get("code", ""), state=params.get("state"), iss=params.get("iss")
                )

            provider = OAuthClientProvider(
                server_url=live.mcp_url,
                client_metadata=metadata,
                storage=storage,
                redirect_handler=redirect_handler,
                callback_handler=callback_handler,
            )
            # The SDK's own error for an answer without a code (possibly inside an exception group).
            with pytest.raises(BaseException) as raised:
                async with httpx2.AsyncClient(auth=provider, timeout=30) as http:
                    async with Client(streamable_http_client(live.mcp_url, http_client=http), mode="legacy") as client:
                        await client.list_tools()
            return chromium, raised.value

    chromium, failure = asyncio.run(scenario())

    assert "No authorization code received" in repr(failure), repr(failure)
    (answer,) = loopback.hits
    sent_state = dict(pair.split("=", 1) for pair in pending["url"].split("?", 1)[1].split("&"))["state"]
    assert answer["error"] == "access_denied" and answer["state"] == sent_state and answer["iss"] == live.base
    assert "code" not in answer
    assert_real_origin_posts(chromium, live.base, 2)
    client_id = storage.client_info.client_id
    assert not get_access_token_model().objects.filter(application__client_id=client_id, user__isnull=False).exists()
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.CONSENT_DENIED, client_id=client_id).count() == 1


def test_cimd_client_login_and_consent_in_chromium(live, loopback, cimd_env, chromium_executable, request):
    client_id = cimd_env.publish("/chromium-client.json", client_name="Chromium CIMD client")
    storage = MemoryStorage()
    metadata = client_metadata(live.port, client_name="Chromium CIMD client", redirect_uri=loopback.redirect_uri)

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            user = ChromiumUser(page, USERNAME, PASSWORD, loopback, screenshots="cimd")
            provider = make_provider(live, storage, user, metadata=metadata, client_metadata_url=client_id)
            seen = await session_run(live, provider, "legacy")
            return chromium, user, seen

    chromium, user, seen = asyncio.run(scenario())

    assert storage.client_info.client_id == client_id
    assert_whoami(seen["whoami"][0], client_id)
    (login_page,) = user.login_pages
    # Before login the document is not fetched yet: the page names the client_id host.
    assert 'id="login-client">client.cimd.test<' in login_page
    (consent_page,) = user.consent_pages
    assert 'id="client-id-host">client.cimd.test<' in consent_page
    assert_real_origin_posts(chromium, live.base, 2)
    assert get_application_model().objects.get(client_id=client_id).registration_source == "cimd"
    assert not any(path == "/oauth/register" for _, path, _ in live.exchanges)
    assert cimd_env.guard.refused == []


def test_referrer_policy_is_same_origin_and_posts_carry_the_real_origin(live, chromium_executable, request):
    """The pages keep their URLs (authorization request, codes) from other sites but let Chromium send
    the real ``Origin`` on their own forms: with ``no-referrer`` Chromium sends ``Origin: null`` and
    Django's CSRF check answers 403 to every form."""

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            login = await page.goto(live.base + "/accounts/login/?next=/")
            headers = await login.all_headers()
            meta = await page.get_attribute('meta[name="referrer"]', "content")
            await page.fill("#id_username", USERNAME)
            await page.fill("#id_password", PASSWORD)
            async with page.expect_navigation():
                await page.click("form [type=submit]")
            landed = page.url
            apps = await page.goto(live.base + "/oauth/connected-apps/")
            apps_headers = await apps.all_headers()
            apps_meta = await page.get_attribute('meta[name="referrer"]', "content")
            return chromium, headers, meta, landed, apps_headers, apps_meta

    chromium, headers, meta, landed, apps_headers, apps_meta = asyncio.run(scenario())
    assert headers["referrer-policy"] == "same-origin" and meta == "same-origin"
    assert apps_headers["referrer-policy"] == "same-origin" and apps_meta == "same-origin"
    assert apps_headers["x-frame-options"] == "DENY" and "no-store" in apps_headers["cache-control"]
    assert landed == live.base + "/"
    (post,) = same_origin_posts(chromium, live.base)
    assert post["origin"] == live.base and post["origin"] != "null" and post["status"] == 302
