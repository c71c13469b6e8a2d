"""The elicitation admin: write-only provider secrets, no secret on any page, revoke (at the provider too), endpoint discovery."""

from __future__ import annotations

import io
import secrets
from datetime import timedelta

import pytest
from django.contrib import messages as message_levels
from django.core.management import call_command
from django.forms import PasswordInput
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_refresh_token_model,
    set_token_value,
)

from elicitation.models import (
    Elicitation,
    StoredSecret,
    ThirdPartyConnection,
    ThirdPartyProvider,
)
from tests.support.elicitation_keys import (
    Application,
    audit_events,
    make_connection,
    make_provider,
    make_secret,
    raw,
    unique,
    use_keys,
)
from tests.support.live import free_port, run_asgi_server

pytestmark = pytest.mark.django_db


AccessToken = get_access_token_model()


RefreshToken = get_refresh_token_model()


def admin_url(model, view="changelist", *args):
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def act(client, model, action, objects):
    return client.post(
        admin_url(model), {"action": action, "_selected_action": [str(o.pk) for o in objects], "index": 0}, follow=True
    )


def messages_of(response):
    return [(m.level, str(m)) for m in response.context["messages"]]


def provider_form(**overrides):
    data = {
        "name": "Acme",
        "slug": "acme",
        "enabled": "on",
        "issuer": "https://acme.example.com",
        "authorization_endpoint": "https://acme.example.com/authorize",
        "token_endpoint": "https://acme.example.com/token",
        "revocation_endpoint": "",
        "userinfo_endpoint": "",
        "client_id": "site-at-acme",
        "new_client_secret": "",
        "token_endpoint_auth_method": "client_secret_basic",
        "use_pkce": "on",
        "scopes": "read",
        "resource": "",
        "_save": "Save",
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


@pytest.fixture
def stocked(key, user):
    """A provider with a client secret, a connection, a stored secret and URL/form elicitations."""
    values = {
        "client_secret": unique("client-secret"),
        "access": unique("access"),
        "refresh": unique("refresh"),
        "stored": unique("sk"),
    }
    provider = make_provider(secret=values["client_secret"])
    connection = make_connection(user, provider, values["access"], values["refresh"], account_label="alice@acme")
    secret = make_secret(user, "openai_key", values["stored"])
    connect = Elicitation.objects.create(
        mode="url", kind="connect", message="Connect your Acme account", provider=provider, scopes="read", user=user
    )
    asked = Elicitation.objects.create(
        mode="url",
        kind="secret",
        message="Enter your key",
        secret_name="openai_key",
        user=user,
        status="completed",
        completed_at=timezone.now(),
    )
    ciphertexts = [
        raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted"),
        *raw(ThirdPartyConnection, connection.pk, "access_token_encrypted", "refresh_token_encrypted"),
        raw(StoredSecret, secret.pk, "value_encrypted"),
    ]
    return {
        "provider": provider,
        "connection": connection,
        "secret": secret,
        "elicitations": [connect, asked],
        "plaintexts": list(values.values()),
        "ciphertexts": ciphertexts,
    }


def test_admin_pages_render_and_never_show_a_secret(admin_client, stocked):
    pages = [
        admin_url(ThirdPartyConnection),
        admin_url(ThirdPartyConnection) + "?q=alice",
        admin_url(ThirdPartyConnection) + f"?provider__id__exact={stocked['provider'].pk}",
        admin_url(ThirdPartyConnection, "change", stocked["connection"].pk),
        admin_url(ThirdPartyConnection, "delete", stocked["connection"].pk),
        admin_url(ThirdPartyProvider),
        admin_url(ThirdPartyProvider) + "?q=acme",
        admin_url(ThirdPartyProvider, "change", stocked["provider"].pk),
        admin_url(ThirdPartyProvider, "add"),
        admin_url(StoredSecret),
        admin_url(StoredSecret) + "?q=openai",
        admin_url(StoredSecret, "change", stocked["secret"].pk),
        admin_url(Elicitation),
        admin_url(Elicitation) + "?kind__exact=connect",
        *[admin_url(Elicitation, "change", e.pk) for e in stocked["elicitations"]],
    ]
    for page in pages:
        response = admin_client.get(page)
        assert response.status_code == 200, page
        html = response.content.decode()
        for value in stocked["plaintexts"] + stocked["ciphertexts"]:
            assert value not in html, (page, value)
        assert "gAAAAA" not in html, page
    # The pages do show what they are about.
    html = admin_client.get(admin_url(ThirdPartyConnection)).content.decode()
    assert "alice@acme" in html and "Acme" in html
    html = admin_client.get(admin_url(StoredSecret)).content.decode()
    assert "openai_key" in html


def test_provider_list_shows_whether_a_secret_is_stored(admin_client, key):
    make_provider("acme", secret="s" * 20)
    make_provider("bare", secret="")
    response = admin_client.get(admin_url(ThirdPartyProvider))
    rows = {p.slug: p for p in response.context["cl"].result_list}
    admin = response.context["cl"].model_admin
    assert (admin.has_client_secret(rows["acme"]), admin.has_client_secret(rows["bare"])) == (True, False)


def test_provider_client_secret_is_write_only(admin_client, key):
    response = admin_client.get(admin_url(ThirdPartyProvider, "add"))
    field = response.context["adminform"].form.fields["new_client_secret"]
    assert isinstance(field.widget, PasswordInput) and field.widget.render_value is False
    assert field.required is False
    html = response.content.decode()
    assert 'type="password" name="new_client_secret"' in html
    assert "(saved providers only)" in html

    secret = unique("client-secret")
    response = admin_client.post(admin_url(ThirdPartyProvider, "add"), provider_form(new_client_secret=secret))
    assert response.status_code == 302
    provider = ThirdPartyProvider.objects.get(slug="acme")
    stored = raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted")
    assert stored.startswith("gAAAAA") and secret not in stored
    assert provider.client_secret == secret

    change = admin_url(ThirdPartyProvider, "change", provider.pk)
    html = admin_client.get(change).content.decode()
    assert secret not in html and stored not in html
    assert 'name="new_client_secret"' in html and 'name="new_client_secret" value=' not in html
    assert "http://testserver/elicitation/callback/acme/" in html  # the redirect URI to register

    # Blank: the stored secret is kept, byte for byte.
    assert admin_client.post(change, provider_form(name="Acme Corp")).status_code == 302
    assert raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted", "name") == (stored, "Acme Corp")

    # A new one replaces it.
    replacement = unique("replacement")
    assert admin_client.post(change, provider_form(new_client_secret=replacement)).status_code == 302
    assert ThirdPartyProvider.objects.get(pk=provider.pk).client_secret == replacement

    # "remove" clears it.
    assert admin_client.post(change, provider_form(clear_client_secret="on")).status_code == 302
    assert raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted") == ""
    assert ThirdPartyProvider.objects.get(pk=provider.pk).client_secret == ""


def test_provider_secret_needs_keys_but_removing_it_does_not(admin_client, settings, key):
    provider = make_provider(secret="old-secret-value")
    use_keys(settings)
    change = admin_url(ThirdPartyProvider, "change", provider.pk)
    response = admin_client.post(change, provider_form(new_client_secret="a-new-secret-value"))
    assert response.status_code == 200
    assert response.context["adminform"].form.non_field_errors() == [
        'Set ELICITATION["ENCRYPTION_KEYS"] before storing a client secret.'
    ]
    stored = raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted")
    assert stored.startswith("gAAAAA")
    # Removing an (undecryptable) secret needs no key.
    assert admin_client.post(change, provider_form(clear_client_secret="on")).status_code == 302
    assert raw(ThirdPartyProvider, provider.pk, "client_secret_encrypted") == ""


def test_provider_form_validates_endpoints(admin_client, key):
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"),
        provider_form(authorization_endpoint="http://acme.example.com/authorize", token_endpoint=""),
    )
    assert response.status_code == 200
    form = response.context["adminform"].form
    assert form.errors["authorization_endpoint"] == ["Use an https URL (http only on a loopback host)."]
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"), provider_form(issuer="", authorization_endpoint="", token_endpoint="")
    )
    assert response.context["adminform"].form.non_field_errors() == [
        "An enabled provider needs its authorization and token endpoints (or discover them from the issuer)."
    ]
    # only an issuer: the endpoints are discovered on save; an unreachable issuer is a form error
    port = free_port()  # nothing listens there
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"),
        provider_form(issuer=f"http://127.0.0.1:{port}", authorization_endpoint="", token_endpoint=""),
    )
    assert response.context["adminform"].form.non_field_errors()[0] == (
        "Could not discover the endpoints from the issuer: network_error: "
        f"http://127.0.0.1:{port}/.well-known/oauth-authorization-server unreachable (ConnectionError)"
    )
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"), provider_form(token_endpoint_auth_method="none", use_pkce=None)
    )
    assert response.context["adminform"].form.non_field_errors() == ["A public client must use PKCE."]
    assert ThirdPartyProvider.objects.count() == 0


def test_connections_cannot_be_added_or_edited(admin_client, stocked):
    connection = stocked["connection"]
    assert admin_client.get(admin_url(ThirdPartyConnection, "add")).status_code == 403
    assert admin_client.post(admin_url(ThirdPartyConnection, "add"), {"scopes": "x"}).status_code == 403
    change = admin_url(ThirdPartyConnection, "change", connection.pk)
    response = admin_client.get(change)
    assert response.status_code == 200
    assert not response.context["has_change_permission"] and 'name="_save"' not in response.content.decode()
    assert admin_client.post(change, {"account_label": "mallory", "scopes": "admin"}).status_code == 403
    assert raw(ThirdPartyConnection, connection.pk, "account_label", "scopes") == ("alice@acme", "read")
    # Stored secrets and elicitations are not editable either.
    assert admin_client.get(admin_url(StoredSecret, "add")).status_code == 403
    assert admin_client.get(admin_url(Elicitation, "add")).status_code == 403
    assert admin_client.post(admin_url(StoredSecret, "change", stocked["secret"].pk), {"name": "x"}).status_code == 403


def test_connection_actions_offer_revoke_but_not_bulk_delete(admin_client, stocked):
    response = admin_client.get(admin_url(ThirdPartyConnection))
    blank, *actions = response.context["action_form"].fields["action"].choices
    assert blank[0] == ""  # Django's empty choice ("---------"; "- Select an option -" from Django 6.1)
    assert actions == [("revoke_connections", "Revoke the selected connections")]
    response = act(admin_client, ThirdPartyConnection, "delete_selected", [stocked["connection"]])
    assert ThirdPartyConnection.objects.filter(pk=stocked["connection"].pk).exists()
    assert audit_events() == []


def test_revoke_action_deletes_and_audits(admin_client, admin_user, stocked, other_user):
    kept = make_connection(other_user, stocked["provider"], "other-token")
    response = act(admin_client, ThirdPartyConnection, "revoke_connections", [stocked["connection"]])
    assert response.status_code == 200
    assert messages_of(response) == [(message_levels.SUCCESS, "1 connection(s) revoked.")]
    assert list(ThirdPartyConnection.objects.values_list("pk", flat=True)) == [kept.pk]
    [event] = audit_events()
    assert event.user_id == stocked["connection"].user_id
    assert event.detail == {"provider": "acme", "reason": "revoked in the admin", "by": admin_user.pk}


def test_deleting_one_connection_revokes_it(admin_client, admin_user, stocked):
    connection = stocked["connection"]
    response = admin_client.post(admin_url(ThirdPartyConnection, "delete", connection.pk), {"post": "yes"})
    assert response.status_code == 302
    assert ThirdPartyConnection.objects.count() == 0
    assert [e.detail for e in audit_events()] == [
        {"provider": "acme", "reason": "revoked in the admin", "by": admin_user.pk}
    ]


def test_stored_secret_can_be_deleted(admin_client, stocked):
    secret = stocked["secret"]
    response = admin_client.post(admin_url(StoredSecret, "delete", secret.pk), {"post": "yes"})
    assert response.status_code == 302
    assert StoredSecret.objects.count() == 0


def test_discover_action_reports_an_unreachable_issuer(admin_client, key):
    port = free_port()  # nothing listens there
    provider = make_provider(
        issuer=f"http://127.0.0.1:{port}", authorization_endpoint="", token_endpoint="", enabled=False
    )
    before = ThirdPartyProvider.objects.filter(pk=provider.pk).values().get()
    response = act(admin_client, ThirdPartyProvider, "discover_endpoints", [provider])
    assert messages_of(response) == [
        (
            message_levels.ERROR,
            f"Acme: network_error: http://127.0.0.1:{port}/.well-known/oauth-authorization-server unreachable (ConnectionError)",
        )
    ]
    assert ThirdPartyProvider.objects.filter(pk=provider.pk).values().get() == before


def test_discover_action_without_issuer(admin_client, key):
    provider = make_provider(issuer="")
    response = act(admin_client, ThirdPartyProvider, "discover_endpoints", [provider])
    assert messages_of(response) == [
        (message_levels.ERROR, "Acme: invalid_request: the provider has no issuer to discover")
    ]


@pytest.fixture
def live(settings, transactional_db):
    """This project on a loopback port; its issuer is its base URL."""
    port = free_port()
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": f"http://127.0.0.1:{port}"}
    settings.ALLOWED_HOSTS = ["127.0.0.1", "localhost", "testserver"]
    from project.asgi import application

    with run_asgi_server(application, port) as base:
        yield base


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_discover_action_fills_endpoints_from_live_metadata(admin_client, key, live):
    port = live.rsplit(":", 1)[1]
    good = make_provider(
        "good",
        issuer=live,
        authorization_endpoint="",
        token_endpoint="",
        userinfo_endpoint="https://accounts.example.com/me",
        enabled=False,
    )
    mismatch = make_provider(
        "mismatch", issuer=f"http://localhost:{port}", authorization_endpoint="", token_endpoint="", enabled=False
    )
    tenant = make_provider(
        "tenant", issuer=f"{live}/tenant", authorization_endpoint="", token_endpoint="", enabled=False
    )
    untouched = {p.pk: ThirdPartyProvider.objects.filter(pk=p.pk).values().get() for p in (mismatch, tenant)}

    response = act(admin_client, ThirdPartyProvider, "discover_endpoints", [good, mismatch, tenant])
    assert sorted(messages_of(response)) == sorted(
        [
            (message_levels.SUCCESS, "Good: endpoints updated"),
            (
                message_levels.ERROR,
                "Mismatch: invalid_response: the metadata issuer differs from the configured issuer (RFC 8414 §3.3)",
            ),
            (
                message_levels.ERROR,
                f"Tenant: invalid_response: {live}/.well-known/oauth-authorization-server/tenant did not answer with a metadata document",
            ),
        ]
    )
    good.refresh_from_db()
    assert (good.authorization_endpoint, good.token_endpoint, good.revocation_endpoint) == (
        f"{live}/oauth/authorize",
        f"{live}/oauth/token",
        f"{live}/oauth/revoke",
    )
    assert good.iss_parameter_supported is True
    assert good.userinfo_endpoint == "https://accounts.example.com/me"  # RFC 8414 has none: kept
    for pk, values in untouched.items():
        assert ThirdPartyProvider.objects.filter(pk=pk).values().get() == values


def mint_pair(application, user):
    """A DOT access token and an (unrelated) refresh token issued by the live site; raw values."""
    expires = timezone.now() + timedelta(hours=1)
    access = AccessToken(user=user, application=application, scope="profile", expires=expires)
    raw_access = secrets.token_urlsafe(32)
    set_token_value(access, raw_access)
    access.save()
    paired = AccessToken(user=user, application=application, scope="profile", expires=expires)
    set_token_value(paired, secrets.token_urlsafe(32))
    paired.save()
    refresh = RefreshToken(user=user, application=application, access_token=paired)
    raw_refresh = secrets.token_urlsafe(32)
    set_token_value(refresh, raw_refresh)
    refresh.save()
    return raw_access, raw_refresh, access.pk, paired.pk, refresh.pk


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    ("right_secret", "how"),
    [(True, "action"), (True, "delete-page"), (False, "action")],
    ids=["action-revoked-at-provider", "delete-page-revoked-at-provider", "action-provider-refuses"],
)
def test_revoking_in_the_admin_revokes_the_tokens_at_the_provider(
    admin_client, admin_user, key, live, user, right_secret, how
):
    client_secret = "s" + secrets.token_urlsafe(24)  # never starts with "-" (argparse would read an option)
    call_command(
        "ensure_oauth_client",
        client_id="site-client",
        client_secret=client_secret,
        redirect_uri=[f"{live}/elicitation/callback/live/"],
        stdout=io.StringIO(),
    )
    application = Application.objects.get(client_id="site-client")
    provider = make_provider(
        "live",
        client_id="site-client",
        secret=client_secret if right_secret else "wrong-" + client_secret,
        issuer=live,
        authorization_endpoint=f"{live}/oauth/authorize",
        token_endpoint=f"{live}/oauth/token",
        revocation_endpoint=f"{live}/oauth/revoke",
    )
    raw_access, raw_refresh, access_pk, paired_pk, refresh_pk = mint_pair(application, user)
    connection = make_connection(user, provider, raw_access, raw_refresh)

    if how == "action":
        response = act(admin_client, ThirdPartyConnection, "revoke_connections", [connection])
        assert messages_of(response) == [(message_levels.SUCCESS, "1 connection(s) revoked.")]
    else:
        response = admin_client.post(admin_url(ThirdPartyConnection, "delete", connection.pk), {"post": "yes"})
        assert response.status_code == 302
    assert ThirdPartyConnection.objects.count() == 0  # deleted locally either way (best effort at the provider)
    assert [e.detail for e in audit_events()] == [
        {"provider": "live", "reason": "revoked in the admin", "by": admin_user.pk}
    ]
    refresh = RefreshToken.objects.get(pk=refresh_pk)
    if right_secret:
        assert not AccessToken.objects.filter(pk__in=[access_pk, paired_pk]).exists()
        assert refresh.revoked is not None
    else:
        assert AccessToken.objects.filter(pk__in=[access_pk, paired_pk]).count() == 2
        assert refresh.revoked is None


@pytest.mark.e2e
@pytest.mark.django_db(transaction=True)
def test_saving_a_provider_with_only_its_issuer_discovers_the_endpoints(admin_client, key, live):
    response = admin_client.post(
        admin_url(ThirdPartyProvider, "add"),
        provider_form(issuer=live, authorization_endpoint="", token_endpoint="", new_client_secret="s" * 32),
    )
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    provider = ThirdPartyProvider.objects.get(slug="acme")
    assert (provider.authorization_endpoint, provider.token_endpoint, provider.revocation_endpoint) == (
        f"{live}/oauth/authorize",
        f"{live}/oauth/token",
        f"{live}/oauth/revoke",
    )
    assert provider.iss_parameter_supported is True
    assert provider.client_secret == "s" * 32
