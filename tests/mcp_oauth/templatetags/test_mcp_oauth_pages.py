"""``{% authorization_request next as auth %}`` (mcp_oauth.templatetags.mcp_oauth_pages): what a login
page says about the authorization request it was sent with; nothing for any other ``next``."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest
from django.template import Context, Template
from django.urls import reverse

pytestmark = pytest.mark.django_db

TEMPLATE = Template(
    "{% load mcp_oauth_pages %}{% authorization_request next as auth %}"
    "{% if auth %}{{ auth.client_name }}|{{ auth.client_id_host }}|{{ auth.registration_source }}|"
    "{{ auth.site_name }}|{{ auth.site_host }}{% else %}none{% endif %}"
)


def render(next_url) -> str:
    return TEMPLATE.render(Context({"next": next_url}))


def authorize(**params) -> str:
    return f"{reverse('oauth2_provider:authorize')}?{urlencode(params, doseq=True)}"


def test_a_known_client_is_named_with_the_site(resource, public_app):
    text = render(authorize(client_id=public_app.client_id, response_type="code"))
    # DOT's registration_source of an application made by hand is "manual"; the site is the
    # default resource's name (the reference site's DEFAULT_RESOURCE_NAME) on the BASE_URL's host
    assert text == "Test client|None|manual|django-mcp-authz demo|testserver"


def test_a_cimd_client_not_seen_yet_is_named_by_its_host(resource):
    text = render(authorize(client_id="https://app.example.com/client.json", response_type="code"))
    assert text.split("|")[:3] == ["None", "app.example.com", "None"]


@pytest.mark.parametrize(
    "next_url",
    [
        None,
        "",
        42,
        "/admin/",
        "https://evil.example.com/oauth/authorize/?client_id=x",  # not this site's endpoint
        "//evil.example.com/oauth/authorize/?client_id=x",
        "/oauth/authorize/",  # no client_id
        "/oauth/authorize/?client_id=a&client_id=b",  # two
        "/oauth/authorize/?client_id=" + "x" * 2001,  # too long
    ],
)
def test_anything_else_says_nothing(next_url, resource):
    assert render(next_url) == "none"
