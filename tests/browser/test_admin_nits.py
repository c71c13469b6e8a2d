"""In Chromium: the admin nits of issue 20, each looked at as an administrator (or a user) sees it.

* the trust-rule list's mode explanation is not covered by the "Add trust rule" button, wide or narrow;
* the applications' grant-type filter offers only what this server's token endpoint serves, plus
  "Not supported by this server" while rows of another type exist;
* a note's owner and an enterprise identity's user are autocomplete boxes that search users;
* two connected apps with the same name can be told apart.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import get_application_model

from mcp_oauth.models import Consent, EnterpriseIdentity, EnterpriseIdentityProvider
from project.models import Note
from tests.e2e.test_python_sdk import PASSWORD, USERNAME, live  # noqa: F401 - fixture
from tests.support.browser import chromium_executable, log_in, open_chromium, require_chromium, shot  # noqa: F401

pytestmark = [pytest.mark.browser, pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

ADMIN, ADMIN_PASSWORD = "admin", "admin-password-browser"


def _admin():
    return get_user_model().objects.create_superuser(ADMIN, "admin@example.com", ADMIN_PASSWORD)


def _intersect(a: dict, b: dict) -> bool:
    return (
        a["x"] < b["x"] + b["width"]
        and b["x"] < a["x"] + a["width"]
        and a["y"] < b["y"] + b["height"]
        and b["y"] < a["y"] + a["height"]
    )


def test_trust_mode_explanation_is_clear_of_the_add_button(live, chromium_executable, request):
    _admin()
    boxes: dict[int, tuple] = {}

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/mcp_oauth/trustrule/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            for width in (1280, 1024, 800, 420):
                await page.set_viewport_size({"width": width, "height": 900})
                await shot(page, f"admin-trust-rules-{width}")
                explanation = await page.locator("#trust-mode").bounding_box()
                button = await page.locator(".object-tools a.addlink").bounding_box()
                title = await page.locator("#content h1").bounding_box()
                boxes[width] = (explanation, button, title, await page.inner_text("#trust-mode"))

    asyncio.run(scenario())
    for width, (explanation, button, title, text) in boxes.items():
        assert explanation and button and explanation["width"] > 0 and button["width"] > 0, width
        assert not _intersect(explanation, button), (width, explanation, button)
        assert not _intersect(explanation, title), (width, explanation, title)
        assert text.startswith("Site-wide mode") and "Rules are evaluated in this order" in text
    # Wide: the button still sits in the title's line, as on every other changelist.
    explanation, button, title, _ = boxes[1280]
    assert button["y"] < title["y"] + title["height"] and explanation["y"] >= button["y"] + button["height"]


def _filter_choices(page, title: str):
    return page.eval_on_selector_all(
        f'#changelist-filter details[data-filter-title="{title}"] li a',
        "links => links.map(a => [a.textContent.trim(), a.parentElement.classList.contains('selected')])",
    )


def test_application_grant_type_filter_offers_what_the_server_serves(live, chromium_executable, request, settings):
    _admin()
    Application = get_application_model()
    made = {
        kind: Application.objects.create(
            name=f"{kind} client",
            client_type="confidential",
            authorization_grant_type=kind,
            redirect_uris="https://app.example/cb" if kind in ("authorization-code", "implicit") else "",
        )
        for kind in ("authorization-code", "client-credentials", "implicit", "password")
    }
    provider = EnterpriseIdentityProvider.objects.create(
        name="Acme SSO", issuer="https://acme.idp.example", jwks_uri="https://acme.idp.example/keys"
    )
    provider.allowed_clients.add(made["client-credentials"])
    seen: dict = {}

    async def listed(page) -> list[str]:
        return sorted(await page.eval_on_selector_all("#result_list tbody th a", "a => a.map(e => e.textContent)"))

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            changelist = live.base + "/admin/oauth2_provider/application/"
            await page.goto(changelist)
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            await shot(page, "admin-applications-filter")
            seen["choices"] = await _filter_choices(page, "grant type")
            for label in ("Not supported by this server", "Client credentials", "JWT bearer"):
                async with page.expect_navigation():
                    await page.click(
                        f'#changelist-filter details[data-filter-title="grant type"] li a:has-text("{label}")'
                    )
                seen[label] = await listed(page)
            options = "#id_authorization_grant_type label"  # DOT's admin shows the grant types as radio buttons
            await page.goto(live.base + "/admin/oauth2_provider/application/add/")
            seen["add_form"] = await page.eval_on_selector_all(options, "o => o.map(e => e.textContent.trim())")
            # the form, submitted as a person would: a machine client with a supported grant type
            await page.fill("#id_name", "submitted machine client")
            await page.check("input[name=client_type][value=confidential]")
            await page.check("input[name=authorization_grant_type][value=client-credentials]")
            async with page.expect_navigation():
                await page.click("input[name=_save]")
            seen["saved"] = await asyncio.to_thread(
                lambda: list(
                    Application.objects.filter(name="submitted machine client").values_list(
                        "authorization_grant_type", flat=True
                    )
                )
            )
            await page.goto(live.base + f"/admin/oauth2_provider/application/{made['implicit'].pk}/change/")
            await shot(page, "admin-application-unsupported-grant")
            seen["implicit_form"] = await page.eval_on_selector_all(options, "o => o.map(e => e.textContent.trim())")
            seen["view_on_site_links"] = await page.locator("a.viewsitelink").count()
            seen["implicit_selected"] = await page.eval_on_selector(
                "input[name=authorization_grant_type]:checked", "i => i.value"
            )
            unsupported = Application.objects.filter(pk__in=[made["implicit"].pk, made["password"].pk])
            await asyncio.to_thread(unsupported.delete)
            await page.goto(changelist)
            seen["choices_after"] = await _filter_choices(page, "grant type")
            settings.MCP_OAUTH = {**settings.MCP_OAUTH, "ENTERPRISE_MANAGED_AUTHORIZATION": False}
            await page.goto(changelist)
            seen["choices_without_enterprise"] = await _filter_choices(page, "grant type")

    asyncio.run(scenario())
    assert seen["choices"] == [
        ["All", True],
        ["Authorization code", False],
        ["Client credentials", False],
        ["JWT bearer (enterprise identity assertion)", False],
        ["Not supported by this server", False],
    ]
    assert seen["Not supported by this server"] == ["implicit client", "password client"]
    # the application form offers what the token endpoint serves; an implicit client keeps its own
    assert seen["add_form"] == ["Authorization code", "Client credentials"]
    assert seen["saved"] == ["client-credentials"]
    assert seen["implicit_form"] == [
        "Authorization code",
        "Implicit (not supported by this server)",
        "Client credentials",
    ]
    assert seen["implicit_selected"] == "implicit"
    assert seen["view_on_site_links"] == 0  # DOT's get_absolute_url() names views this app does not route
    assert seen["Client credentials"] == ["client-credentials client"]
    assert seen["JWT bearer"] == ["client-credentials client"]
    assert [label for label, _ in seen["choices_after"]] == [
        "All",
        "Authorization code",
        "Client credentials",
        "JWT bearer (enterprise identity assertion)",
    ]
    assert [label for label, _ in seen["choices_without_enterprise"]] == [
        "All",
        "Authorization code",
        "Client credentials",
    ]


async def _pick_user(page, select_id: str, term: str) -> list[str]:
    """Open the autocomplete box of ``select_id``, type ``term``, pick the first result; the results offered."""
    await page.click(f"#{select_id} + .select2 .select2-selection")
    async with page.expect_response(lambda r: "/autocomplete/" in r.url and f"term={term}" in r.url) as searched:
        await page.fill(".select2-container--open .select2-search__field", term)
    assert (await searched.value).status == 200
    await page.wait_for_function(  # the results of this search, not the list shown on opening (every user)
        "term => { const o = [...document.querySelectorAll('.select2-results__option')];"
        " return o.length > 0 && o.every(e => e.textContent.includes(term)); }",
        arg=term,
    )
    offered = await page.eval_on_selector_all(".select2-results__option", "o => o.map(e => e.textContent)")
    await page.keyboard.press("Enter")
    return offered


def test_user_boxes_are_autocomplete(live, chromium_executable, request):
    _admin()
    User = get_user_model()
    User.objects.create_user("margaret", "margaret@example.com", "x-password-1")
    owner = User.objects.create_user("marcel", "marcel@example.com", "x-password-2")
    provider = EnterpriseIdentityProvider.objects.create(
        name="Acme SSO", issuer="https://acme.idp.example", jwks_uri="https://acme.idp.example/keys"
    )
    seen: dict = {}

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/admin/project/note/add/")
            await log_in(page, ADMIN, ADMIN_PASSWORD)
            seen["note_widget"] = await page.get_attribute("#id_owner", "class")
            seen["note_raw_id"] = await page.locator("#lookup_id_owner").count()
            seen["note_offered"] = await _pick_user(page, "id_owner", "marc")
            await page.fill("#id_title", "Picked by search")
            await shot(page, "admin-note-owner-autocomplete")
            async with page.expect_navigation():
                await page.click('input[name="_save"]')
            seen["note_message"] = await page.inner_text(".messagelist")

            await page.goto(live.base + "/admin/mcp_oauth/enterpriseidentity/add/")
            seen["identity_widget"] = await page.get_attribute("#id_user", "class")
            await page.select_option("#id_provider", str(provider.pk))
            await page.fill("#id_subject", "00u-marcel")
            seen["identity_offered"] = await _pick_user(page, "id_user", "marc")
            async with page.expect_navigation():
                await page.click('input[name="_save"]')
            seen["identity_message"] = await page.inner_text(".messagelist")

            await page.goto(live.base + f"/admin/mcp_oauth/enterpriseidentityprovider/{provider.pk}/change/")
            seen["inline_widget"] = await page.get_attribute("#id_identities-0-user, select[name$='-0-user']", "class")

    asyncio.run(scenario())
    assert "admin-autocomplete" in seen["note_widget"] and seen["note_raw_id"] == 0
    assert seen["note_offered"] == ["marcel"]  # searched: "margaret" and "admin" are not offered
    assert "was added successfully" in seen["note_message"]
    assert Note.objects.get(title="Picked by search").owner == owner
    assert "admin-autocomplete" in seen["identity_widget"] and seen["identity_offered"] == ["marcel"]
    assert "was added successfully" in seen["identity_message"]
    assert EnterpriseIdentity.objects.get(subject="00u-marcel").user == owner
    assert "admin-autocomplete" in seen["inline_widget"]


def test_connected_apps_with_the_same_name_are_told_apart(live, chromium_executable, request):
    user = get_user_model().objects.get(username=USERNAME)
    Application = get_application_model()
    first = Application.objects.create(
        name="Chat client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="https://chat.example/cb",
    )
    second = Application.objects.create(
        name="chat  Client",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="https://evil.example/cb http://127.0.0.1/callback",
    )
    other = Application.objects.create(
        name="Notes app",
        client_type="public",
        authorization_grant_type="authorization-code",
        redirect_uris="https://notes.example/cb",
    )
    Application.objects.filter(pk=first.pk).update(created=timezone.make_aware(dt.datetime(2026, 1, 2, 3, 4)))
    for application in (first, second, other):
        Consent.objects.create(user=user, application=application, scope="mcp")
    seen: dict = {}

    async def scenario():
        async with open_chromium(chromium_executable, request.node.name) as chromium:
            page = await chromium.new_page()
            await page.goto(live.base + "/oauth/connected-apps/")
            await log_in(page, USERNAME, PASSWORD)
            await shot(page, "connected-apps-same-name")
            for application in (first, second, other):
                form = page.locator(f'.grant[data-client-id="{application.client_id}"]')
                seen[application.pk] = {
                    "text": await form.inner_text(),
                    "note": await form.locator(".grant-same-name").count(),
                    "client_id": await form.locator(".grant-client-id").count()
                    and await form.locator(".grant-client-id").inner_text(),
                    "registered": await form.locator(".grant-registered").count()
                    and await form.locator(".grant-registered").inner_text(),
                    "hosts": await form.locator(".grant-redirect-hosts").count()
                    and await form.locator(".grant-redirect-hosts").inner_text(),
                }

    asyncio.run(scenario())
    one, two, notes = seen[first.pk], seen[second.pk], seen[other.pk]
    assert one["note"] == two["note"] == 1 and "also named" in one["text"] and "also named" in two["text"]
    assert one["client_id"] == first.client_id[:8] + "…" and two["client_id"] == second.client_id[:8] + "…"
    assert one["registered"] == "2026-01-02 03:04" and two["registered"] != one["registered"]
    assert one["hosts"].split() == ["chat.example"] and two["hosts"].split() == ["evil.example", "127.0.0.1"]
    assert one["text"] != two["text"]
    # A name no other app shares: no note and none of the extra lines.
    assert notes["note"] == 0 and notes["client_id"] == notes["registered"] == notes["hosts"] == 0
