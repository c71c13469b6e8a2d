"""Issue #31 "Done when", end to end against the live ASGI server, in both eras.

Two organizations, A and B; ``demo`` belongs to both; ``ann`` administers A (staff, not a superuser).

1. A's admin, in Chromium in the Django admin, makes A require approval and approves client X alone
   (the enterprise chat client, by its exact client ID).
2. The official Python SDK client as client Y (registered by DCR) authorizing for A, at A's own
   endpoint ``/mcp/o/a`` and on the shared endpoint choosing A on the consent page, is refused with
   the page saying an administrator of A must approve it (read in Chromium); the client is sent
   nothing. The same client Y works for B (``whoami`` acting for B), at B's endpoint and on the
   shared endpoint choosing B.
3. A's admin approves Y in Chromium; Y then works for A.
4. Y's token for A is 401 at B's endpoint (``invalid_token``, B's own metadata).
5. An ID-JAG from A's enterprise IdP is refused for B's endpoint (``invalid_grant``) and accepted
   for A's (and for the shared endpoint, acting for A); the token it yields calls ``whoami`` there.
6. A's admin denies Y in Chromium: Y's token for A is 401 at A's endpoint at once.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import httpx2
import pytest
from django.contrib.auth import get_user_model
from django.db.models import Q
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from oauth2_provider.models import get_access_token_model, get_application_model

from mcp_oauth.models import (
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
    Organization,
    OrganizationClient,
    ProtectedResource,
)
from tests.e2e.test_python_sdk import (  # noqa: F401 - fixture
    PASSWORD,
    USERNAME,
    MemoryStorage,
    client_metadata,
    live,
    make_provider,
    structured,
)
from tests.support.browser import (
    chromium_executable,  # noqa: F401 - fixture
    log_in,
    loopback,  # noqa: F401 - fixture
    open_chromium,
    require_chromium,  # noqa: F401 - fixture
)
from tests.support.jwt_keys import claims, make_key
from tests.support.oauth_helpers import basic
from tests.support.organization_helpers import add_member, make_organization

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "ann", "ann-admin-password-e2e"
IDP = "https://idp.a.example"
SUBJECT = "A-0042"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ERAS = {"2025-11-25": "legacy", "2026-07-28": "auto"}
REFUSED_TITLE = "An administrator of Organization A must approve this application"
REFUSED_MESSAGE = (
    "An administrator of Organization A must approve Desk Agent Y before members can use it for Organization A."
)


class AdminMustApprove(Exception):
    """The member's answer ended on the page saying an admin must approve the client."""


@dataclass
class Endpoint:
    """What :func:`tests.e2e.test_python_sdk.make_provider` needs of a live server, at one MCP path."""

    base: str
    port: int
    path: str

    @property
    def mcp_url(self) -> str:
        return self.base + self.path


@dataclass
class Member:
    """``demo`` in Chromium for the SDK's OAuth: logs in once, picks ``choose`` (an organization's
    pk) when the consent page offers a choice, and Authorizes. A refusal page is recorded and raised."""

    page: object
    listener: object
    choose: int | None = None
    consent_pages: list[str] = field(default_factory=list)
    refusals: list[tuple[int, str, str]] = field(default_factory=list)

    async def authorize(self, url: str) -> dict[str, str]:
        seen = len(self.listener.hits)
        await self.page.goto(url)
        if urlsplit(self.page.url).path.startswith(("/accounts/login", "/oauth/login")):
            await log_in(self.page, USERNAME, PASSWORD)
        await self.page.wait_for_selector("#authorizationForm")
        self.consent_pages.append(await self.page.content())
        if self.choose is not None:
            await self.page.check(f'input[name="organization"][value="{self.choose}"]')
        async with self.page.expect_navigation() as navigation:
            await self.page.click("#authorize")
        response = await navigation.value
        if urlsplit(self.page.url).path == "/oauth/authorize":
            title = await self.page.inner_text("h1")
            message = await self.page.inner_text("#organization-client-message")
            self.refusals.append((response.status, title.strip(), message.strip()))
            raise AdminMustApprove(message)
        return await self.listener.wait(seen + 1)


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups and their causes."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    found = [exc]
    if exc.__cause__ is not None:
        found += leaves(exc.__cause__)
    if exc.__context__ is not None and exc.__context__ is not exc.__cause__:
        found += leaves(exc.__context__)
    return found


async def whoami(endpoint: Endpoint, provider, mode: str) -> dict:
    """``whoami`` through the SDK; its structured content, with ``versions``: the
    ``MCP-Protocol-Version`` headers of the SDK's answered POSTs (the era it spoke)."""
    versions: set[str] = set()

    async def record(response: httpx2.Response) -> None:
        if response.request.method == "POST" and response.status_code == 200:
            versions.add(response.request.headers.get("mcp-protocol-version", ""))

    async with httpx2.AsyncClient(auth=provider, timeout=30, event_hooks={"response": [record]}) as http:
        async with Client(streamable_http_client(endpoint.mcp_url, http_client=http), mode=mode) as client:
            result = await client.call_tool("whoami", {})
    assert not result.is_error, result
    return {**structured(result), "versions": versions}


async def refused(endpoint: Endpoint, provider, mode: str) -> list[BaseException]:
    try:
        await whoami(endpoint, provider, mode)
    except Exception as exc:  # noqa: BLE001 - the SDK's flow ends in the member's refusal page; asserted below
        return leaves(exc)
    raise AssertionError(f"client Y was not refused at {endpoint.mcp_url}")


def initialize_body(version: str) -> dict:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "e2e", "version": "1"}},
    }


def answer_of(response: httpx2.Response) -> dict:
    """The JSON-RPC answer of a POST (a JSON body, or the last ``data:`` of an event stream)."""
    assert response.status_code == 200, (response.status_code, response.text)
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return json.loads(data[-1])


def raw_whoami(url: str, token: str, era: str) -> dict:
    """``tools/call whoami`` with ``token`` in ``era``, without the SDK: its structured content."""
    headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "whoami", "arguments": {}}}
    if era == "2026-07-28":
        call["params"]["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": era,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "e2e", "version": "1"},
        }
        headers.update({"MCP-Protocol-Version": era, "Mcp-Method": "tools/call", "Mcp-Name": "whoami"})
    else:
        opened = httpx2.post(url, json=initialize_body(era), headers=headers, timeout=30)
        answer_of(opened)
        headers.update({"MCP-Protocol-Version": era, "Mcp-Session-Id": opened.headers["mcp-session-id"]})
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert httpx2.post(url, json=note, headers=headers, timeout=30).status_code == 202
    result = answer_of(httpx2.post(url, json=call, headers=headers, timeout=30))["result"]
    assert not result.get("isError"), result
    return result["structuredContent"]


@dataclass
class World:
    a: Organization
    b: Organization
    x: object
    x_secret: str
    idp_key: object


@pytest.fixture
def world(live) -> World:
    users = get_user_model().objects
    demo = users.get(username=USERNAME)
    ann = users.create_user(ADMIN, "ann@example.com", ADMIN_PASSWORD, is_staff=True)
    a = make_organization("a", "Organization A")
    b = make_organization("b", "Organization B")
    add_member(demo, a)
    add_member(demo, b)
    add_member(ann, a, role="admin")
    Application = get_application_model()
    x = Application(
        name="Enterprise Chat X",
        client_id="client-x",
        client_type=Application.CLIENT_CONFIDENTIAL,
        authorization_grant_type=Application.GRANT_CLIENT_CREDENTIALS,
    )
    x_secret = x.client_secret
    x.save()
    key = make_key("ES256")
    idp = EnterpriseIdentityProvider.objects.create(name="A's IdP", issuer=IDP, jwks=key.jwks, organization=a)
    idp.allowed_clients.add(x)
    idp.allowed_resources.add(*ProtectedResource.objects.filter(Q(organization__in=[a, b]) | Q(is_default=True)))
    EnterpriseIdentity.objects.create(provider=idp, subject=SUBJECT, user=demo)
    return World(a=a, b=b, x=x, x_secret=x_secret, idp_key=key)


def id_jag(world: World, live_base: str, resource: str) -> str:
    values = {
        "iss": IDP,
        "sub": SUBJECT,
        "aud": live_base,
        "resource": resource,
        "client_id": world.x.client_id,
        "scope": "mcp",
    }
    return world.idp_key.sign(claims(**values), typ="oauth-id-jag+jwt")


@pytest.mark.parametrize("era", list(ERAS))
def test_issue_31_done_when(live, world, loopback, chromium_executable, request, era):
    mode = ERAS[era]
    at_a = Endpoint(live.base, live.port, "/mcp/o/a")
    at_b = Endpoint(live.base, live.port, "/mcp/o/b")
    shared = Endpoint(live.base, live.port, "/mcp")
    metadata = client_metadata(live.port, "Desk Agent Y", loopback.redirect_uri)
    seen: dict = {}

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            admin = await chromium.new_page()
            await admin.goto(live.base + "/admin/")
            await log_in(admin, ADMIN, ADMIN_PASSWORD)

            # 1. A requires approval; X alone is approved, by its exact client ID.
            await admin.goto(f"{live.base}/admin/mcp_oauth/organization/{world.a.pk}/change/")
            await admin.check("#id_client_approval_required")
            async with admin.expect_navigation():
                await admin.click("input[name=_save]")
            seen["policy_saved"] = await admin.inner_text("ul.messagelist")
            await admin.goto(live.base + "/admin/mcp_oauth/organizationclient/add/")
            await admin.click("#id_organization + .select2 .select2-selection")
            await admin.click(".select2-results__option:has-text('Organization A')")
            await admin.fill("#id_application", world.x.client_id)
            await admin.select_option("#id_status", "approved")
            async with admin.expect_navigation():
                await admin.click("input[name=_save]")
            seen["x_added"] = await admin.inner_text("ul.messagelist")

            page = await chromium.new_page()
            member = Member(page, loopback)
            first = MemoryStorage()

            # 2. Y for A: refused at A's endpoint, and on the shared endpoint choosing A.
            seen["at_a"] = await refused(at_a, make_provider(at_a, first, member, metadata), mode)
            y = first.client_info
            member.choose = world.a.pk
            seen["shared_a"] = await refused(
                shared, make_provider(shared, MemoryStorage(client_info=y), member, metadata), mode
            )
            seen["refusals"] = list(member.refusals)
            seen["hits_after_refusals"] = len(loopback.hits)

            # ... and works for B, at B's endpoint and on the shared endpoint choosing B.
            member.choose = None
            seen["at_b"] = await whoami(at_b, make_provider(at_b, MemoryStorage(client_info=y), member, metadata), mode)
            member.choose = world.b.pk
            seen["shared_b"] = await whoami(
                shared, make_provider(shared, MemoryStorage(client_info=y), member, metadata), mode
            )

            # 3. A's admin approves Y (the pending request the member's answer filed); Y works for A.
            pending = await asyncio.to_thread(
                lambda: OrganizationClient.objects.select_related("requested_by").get(
                    organization=world.a, application__client_id=y.client_id
                )
            )
            seen["pending"] = (pending.status, pending.requested_by.username)
            await admin.goto(live.base + "/admin/mcp_oauth/organizationclient/?status__exact=pending")
            await admin.check(f"input[name=_selected_action][value='{pending.pk}']")
            await admin.select_option("select[name=action]", "approve")
            async with admin.expect_navigation():
                await admin.click("button[name=index]")
            seen["approved"] = await admin.inner_text("ul.messagelist")
            member.choose = None
            for_a = MemoryStorage(client_info=y)
            seen["after_approval"] = await whoami(at_a, make_provider(at_a, for_a, member, metadata), mode)
            seen["token_for_a"] = for_a.tokens.access_token
            seen["y"] = y.client_id

    asyncio.run(scenario())

    y = seen["y"]
    assert "was changed successfully" in seen["policy_saved"]
    assert "was added successfully" in seen["x_added"]
    assert [type(leaf) for leaf in seen["at_a"]].count(AdminMustApprove) == 1
    assert [type(leaf) for leaf in seen["shared_a"]].count(AdminMustApprove) == 1
    assert seen["refusals"] == [(403, REFUSED_TITLE, REFUSED_MESSAGE)] * 2
    assert seen["hits_after_refusals"] == 0  # the client was sent nothing
    assert seen["pending"] == ("pending", USERNAME)
    for name, organization, path in (("at_b", "b", "/mcp/o/b"), ("shared_b", "b", "/mcp")):
        data = seen[name]
        assert (data["user"], data["client_id"], data["organization"]) == (USERNAME, y, organization), name
        assert data["resource"] == live.base + path, name
        assert era in data["versions"] and data["versions"] <= {era, "", "2025-11-25"}, (name, data["versions"])
    assert "Approved 1 client." in seen["approved"]
    data = seen["after_approval"]
    assert (data["user"], data["client_id"], data["organization"], data["resource"]) == (
        USERNAME,
        y,
        "a",
        live.base + "/mcp/o/a",
    )
    assert {
        row.application.client_id: row.status for row in OrganizationClient.objects.filter(organization=world.a)
    } == {
        "client-x": "approved",
        y: "approved",
    }

    # 4. A's token at B's endpoint: 401 invalid_token, pointing at B's own metadata.
    headers = {"Authorization": f"Bearer {seen['token_for_a']}", "Accept": "application/json, text/event-stream"}
    at_b_with_a = httpx2.post(at_b.mcp_url, json=initialize_body(era), headers=headers, timeout=30)
    assert at_b_with_a.status_code == 401
    assert at_b_with_a.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{live.base}/.well-known/oauth-protected-resource/mcp/o/b", scope="mcp", '
        'error="invalid_token", error_description="The access token was not issued for this resource."'
    )

    # 5. An ID-JAG from A's IdP: refused for B, accepted for A (X is approved for A).
    def redeem(resource: str) -> httpx2.Response:
        return httpx2.post(
            live.base + "/oauth/token",
            data={"grant_type": JWT_BEARER, "assertion": id_jag(world, live.base, resource)},
            headers={"Authorization": basic(world.x.client_id, world.x_secret)},
            timeout=30,
        )

    before = get_access_token_model().objects.count()
    for_b = redeem(at_b.mcp_url)
    assert (for_b.status_code, for_b.json()["error"]) == (400, "invalid_grant")
    assert get_access_token_model().objects.count() == before
    for_a = redeem(at_a.mcp_url)
    assert for_a.status_code == 200, for_a.text
    for resource in (at_a.mcp_url, shared.mcp_url):  # A's endpoint, and the shared one acting for A (the IdP's)
        response = for_a if resource == at_a.mcp_url else redeem(resource)
        assert response.status_code == 200, response.text
        data = raw_whoami(resource, response.json()["access_token"], era)
        assert (data["user"], data["client_id"], data["organization"], data["resource"]) == (
            USERNAME,
            "client-x",
            "a",
            resource,
        )

    # 6. A's admin denies Y in Chromium: Y's token for A stops acting for A at once.
    assert raw_whoami(at_a.mcp_url, seen["token_for_a"], era)["organization"] == "a"

    async def deny() -> str:
        async with open_chromium(chromium_executable, request.node.name + "-deny") as chromium:
            admin = await chromium.new_page()
            await admin.goto(live.base + "/admin/mcp_oauth/organizationclient/?status__exact=approved")
            await log_in(admin, ADMIN, ADMIN_PASSWORD)
            row = await asyncio.to_thread(
                lambda: OrganizationClient.objects.get(organization=world.a, application__client_id=y).pk
            )
            await admin.check(f"input[name=_selected_action][value='{row}']")
            await admin.select_option("select[name=action]", "deny")
            async with admin.expect_navigation():
                await admin.click("button[name=index]")
            return await admin.inner_text("ul.messagelist")

    assert "Denied 1 client." in asyncio.run(deny())
    headers["Authorization"] = f"Bearer {seen['token_for_a']}"
    after_denial = httpx2.post(at_a.mcp_url, json=initialize_body(era), headers=headers, timeout=30)
    assert after_denial.status_code == 401
    assert 'error="invalid_token"' in after_denial.headers["www-authenticate"]
