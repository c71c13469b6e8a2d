"""Admin of signed-assertion trust: enterprise IdPs (form rules) and client keys on applications."""

from __future__ import annotations

import json

import pytest
from django.contrib import admin
from django.contrib.admin.widgets import AutocompleteSelect, ForeignKeyRawIdWidget
from django.contrib.auth import get_user_model
from django.test import RequestFactory
from oauth2_provider.models import get_application_model

from mcp_oauth.admin.enterprise import EnterpriseIdentityAdmin, EnterpriseIdentityInline
from mcp_oauth.models import ClientProfile, EnterpriseIdentity, EnterpriseIdentityProvider
from tests.support.jwt_keys import make_key


@pytest.fixture
def admin_client(client, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client.force_login(admin)
    return client


def idp_form(resource, app, **values):
    data = {
        "name": "Acme",
        "issuer": "https://acme.idp.example",
        "enabled": "on",
        "jwks_uri": "https://acme.idp.example/keys.json",
        "jwks": "",
        "algorithms": "RS256 ES256",
        "allowed_clients": [app.pk],
        "allowed_resources": [resource.pk],
        "allowed_scopes": "",
        "user_policy": "linked",
        "identities-TOTAL_FORMS": "0",
        "identities-INITIAL_FORMS": "0",
        "identities-MIN_NUM_FORMS": "0",
        "identities-MAX_NUM_FORMS": "1000",
    }
    data.update(values)
    return data


@pytest.fixture
def app(db):
    Application = get_application_model()
    return Application.objects.create(
        name="c", client_type="confidential", authorization_grant_type="client-credentials"
    )


@pytest.mark.django_db
def test_add_idp(admin_client, resource, app):
    response = admin_client.post("/admin/mcp_oauth/enterpriseidentityprovider/add/", idp_form(resource, app))
    assert response.status_code == 302, response.content[:2000]
    idp = EnterpriseIdentityProvider.objects.get()
    assert list(idp.allowed_clients.all()) == [app] and idp.algorithm_list == ["RS256", "ES256"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"algorithms": "RS256 none"}, "Allowed here"),
        ({"algorithms": "HS256"}, "Allowed here"),
        ({"jwks_uri": "http://acme.idp.example/keys.json"}, "must be an https URL"),
        ({"jwks_uri": ""}, "JWKS URL or its keys inline"),
        ({"jwks_uri": "", "jwks": json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]})}, "private or symmetric"),
        ({"jwks_uri": "", "jwks": json.dumps({"keys": "x"})}, "not a JSON Web Key Set"),
    ],
)
def test_idp_form_refuses_unusable_settings(admin_client, resource, app, values, message):
    response = admin_client.post("/admin/mcp_oauth/enterpriseidentityprovider/add/", idp_form(resource, app, **values))
    assert response.status_code == 200
    assert message in response.content.decode()
    assert not EnterpriseIdentityProvider.objects.exists()


@pytest.mark.django_db
def test_client_keys_editable_on_the_application(admin_client, app):
    ClientProfile.objects.create(application=app)
    page = admin_client.get(f"/admin/oauth2_provider/application/{app.pk}/change/")
    html = page.content.decode()
    assert 'name="mcp_profile-0-jwks"' in html and 'name="mcp_profile-0-jwks_uri"' in html


@pytest.mark.django_db
def test_add_idp_with_inline_public_keys(admin_client, resource, app):
    jwks = make_key("ES256").jwks
    form = idp_form(resource, app, jwks_uri="", jwks=json.dumps(jwks))
    response = admin_client.post("/admin/mcp_oauth/enterpriseidentityprovider/add/", form)
    assert response.status_code == 302, response.content[:2000]
    assert EnterpriseIdentityProvider.objects.get().jwks == jwks


@pytest.mark.parametrize("user_admin", ["searchable", "not searchable", "not registered"])
def test_identity_user_box_is_autocomplete_when_the_user_admin_can_search(user_admin, rf: RequestFactory):
    site = admin.AdminSite(name=f"test-{user_admin.replace(' ', '-')}")
    if user_admin != "not registered":
        search = ("username",) if user_admin == "searchable" else ()
        site.register(get_user_model(), type("UserAdmin", (admin.ModelAdmin,), {"search_fields": search}))
    identity_admin = EnterpriseIdentityAdmin(EnterpriseIdentity, site)
    inline = EnterpriseIdentityInline(EnterpriseIdentityProvider, site)
    request = rf.get("/")
    request.user = get_user_model()(is_superuser=True, is_staff=True)
    field = EnterpriseIdentity._meta.get_field("user")
    expected = AutocompleteSelect if user_admin == "searchable" else ForeignKeyRawIdWidget
    for model_admin in (identity_admin, inline):
        assert model_admin.check() == []  # no admin.E039 / E040 for a site whose user admin cannot search
        widget = model_admin.formfield_for_foreignkey(field, request).widget
        assert isinstance(widget, expected), (model_admin, widget)
