"""End to end: the official MCP Python SDK (mcp 2.3.0) with ``client_metadata_url`` against the live server.

The client's metadata document is served by a local HTTPS server signed by a test
CA (``tests/support/https_server.py``); the authorization server fetches it (CIMD), the SDK
never registers. Then the document changes (a new redirect URI): once its max-age
has passed, a new client using that redirect URI completes the flow, with no
restart of the server.
"""

from __future__ import annotations

import pytest
from django.utils import timezone
from mcp.client.auth import OAuthClientProvider
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import ClientMetadataDocument
from tests.e2e.test_python_sdk import (  # noqa: F401 - live is a fixture
    PASSWORD,
    USERNAME,
    MemoryStorage,
    assert_whoami,
    client_metadata,
    live,
    make_provider,
    run,
    session_run,
    with_browser,
)
from tests.support.https_server import cimd_dns, cimd_env, egress_guard, wait_until  # noqa: F401 - fixtures
from tests.support.live import HeadlessBrowser, free_port

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def cimd_provider(live, storage, browser, client_metadata_url: str, redirect_uri: str) -> OAuthClientProvider:
    metadata = client_metadata(live.port, client_name="e2e CIMD client", redirect_uri=redirect_uri)
    return make_provider(live, storage, browser, metadata=metadata, client_metadata_url=client_metadata_url)


def test_sdk_with_client_metadata_url_then_document_change(live, cimd_env):
    max_age = 1
    client_id = cimd_env.publish("/mcp-client.json", max_age=max_age, client_name="e2e CIMD client")
    route = cimd_env.server.routes["/mcp-client.json"]
    route.etag = '"v1"'

    # 1. The whole flow with the document as first published.
    first_redirect = f"http://127.0.0.1:{free_port()}/callback"
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    seen = run(
        with_browser(
            browser, session_run(live, cimd_provider(live, storage, browser, client_id, first_redirect), "legacy")
        )
    )
    assert storage.client_info.client_id == client_id
    assert_whoami(seen["whoami"][0], client_id)
    assert not any(path == "/oauth/register" for _, path, _ in live.exchanges)  # CIMD, not DCR
    assert 'id="client-id-host">client.cimd.test<' in browser.consent_pages[0]
    application = get_application_model().objects.get(client_id=client_id)
    assert application.registration_source == "cimd" and application.client_type == "public"
    assert get_access_token_model().objects.get(application=application).resource == [live.mcp_url]
    fetches = cimd_env.server.fetches("/mcp-client.json")
    assert len(fetches) == 1 and "If-None-Match" not in fetches[0].headers

    # 2. The document gains a redirect URI; once its max-age has passed, a client using it gets through.
    second_redirect = f"http://127.0.0.1:{free_port()}/callback-v2"
    route.body = cimd_env.document(
        client_id,
        client_name="e2e CIMD client",
        redirect_uris=["http://127.0.0.1/callback", "http://127.0.0.1/callback-v2"],
    )
    route.etag = '"v2"'
    expires_at = ClientMetadataDocument.objects.get(client_id=client_id).expires_at
    assert wait_until(lambda: timezone.now() > expires_at, timeout=max_age + 5)

    live.exchanges.clear()
    storage = MemoryStorage()
    browser = HeadlessBrowser(live.base, USERNAME, PASSWORD)
    seen = run(
        with_browser(
            browser, session_run(live, cimd_provider(live, storage, browser, client_id, second_redirect), "legacy")
        )
    )
    assert_whoami(seen["whoami"][0], client_id)
    revalidation = cimd_env.server.fetches("/mcp-client.json")[1]
    assert revalidation.headers["If-None-Match"] == '"v1"' and revalidation.status == 200
    assert "http://127.0.0.1/callback-v2" in get_application_model().objects.get(client_id=client_id).redirect_uris
    assert cimd_env.guard.refused == []
