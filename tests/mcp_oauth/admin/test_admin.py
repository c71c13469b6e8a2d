"""The admin screens, as a superuser: pages render, filters and search work, actions do what they say,
nothing secret is shown, and the audit log cannot be edited."""

from __future__ import annotations

import secrets
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_refresh_token_model,
    set_token_value,
)

from mcp_oauth.audit import record
from mcp_oauth.models import AuditEvent, ClientMetadataDocument, ClientProfile, Consent, McpSession, TrustRule

pytestmark = pytest.mark.django_db

Application = get_application_model()
AccessToken = get_access_token_model()
RefreshToken = get_refresh_token_model()
CIMD_URL = "https://tools.example.com/client.json"


@pytest.fixture
def admin(client, admin_user):
    client.force_login(admin_user)
    return client


def url(model, view="changelist", *args):
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


def act(admin, model, action, objects, follow=True):
    return admin.post(
        url(model),
        {"action": action, "_selected_action": [str(o.pk) for o in objects], "index": 0},
        follow=follow,
    )


def messages_of(response):
    return [str(m) for m in response.context["messages"]]


def make_app(**fields):
    defaults = {
        "name": "Client",
        "client_type": "public",
        "authorization_grant_type": "authorization-code",
        "redirect_uris": "http://127.0.0.1/callback",
        "registration_source": "dcr",
    }
    return Application.objects.create(**{**defaults, **fields})


def live_token(application, user, with_refresh=True):
    token = AccessToken(user=user, application=application, scope="mcp", expires=timezone.now() + timedelta(hours=1))
    raw = secrets.token_urlsafe(32)
    set_token_value(token, raw)
    token.save()
    if with_refresh:
        refresh = RefreshToken(user=user, application=application, access_token=token)
        set_token_value(refresh, secrets.token_urlsafe(32))
        refresh.save()
    return raw


@pytest.fixture
def populated(user, other_user, resource):
    """One of everything, so each list page has rows to render."""
    dcr = make_app(name="Dyn client")
    cimd = make_app(
        name="Doc client", client_id=CIMD_URL, registration_source="cimd", redirect_uris="https://tools.example.com/cb"
    )
    manual = make_app(
        name="Admin client",
        registration_source="manual",
        client_type="confidential",
        redirect_uris="https://app.example.org/cb",
    )
    ClientProfile.objects.create(application=dcr, last_used_at=timezone.now())
    TrustRule.objects.create(target="client_id_host", pattern="*.example.com", action="allow", note="vendors")
    Consent.record_grant(user, dcr, ["mcp"], "http://testserver/mcp")
    Consent.record_grant(other_user, dcr, ["mcp"], "http://testserver/mcp")
    live_token(dcr, user)
    live_token(dcr, other_user)
    record(
        AuditEvent.Kind.TOKEN_ISSUED, user=user, client_id=dcr.client_id, detail={"grant_type": "authorization_code"}
    )
    record(AuditEvent.Kind.TRUST_DENIED, client_id="x", detail={"stage": "registration", "verdict": "denied"})
    ClientMetadataDocument.objects.create(
        client_id=CIMD_URL,
        application=cimd,
        document={"client_id": CIMD_URL, "client_name": "Doc client"},
        fetched_at=timezone.now(),
        expires_at=timezone.now() + timedelta(hours=1),
    )
    McpSession.objects.create(user=user, application=dcr, resource=resource, protocol_version="2025-11-25")
    return {"dcr": dcr, "cimd": cimd, "manual": manual}


LISTS = [
    (
        Application,
        [
            "",
            "q=Dyn",
            "registration_source__exact=dcr",
            "trust=trusted",
            "trust=unknown",
            "trust=denied",
            "used=never",
            "used=7",
            "used=old",
            "q=%00",
            "q=" + "x" * 2000,
        ],
    ),
    (TrustRule, ["", "q=example", "action__exact=allow", "target__exact=client_id_host", "enabled__exact=1"]),
    (Consent, ["", "q=alice", "state=active", "state=revoked", "q=%ED%A0%80"]),
    (AuditEvent, ["", "q=127.0.0.1", "kind__exact=trust.denied", "q=x", "created_at__year=2030"]),
    (ClientMetadataDocument, ["", "q=tools", "state=fresh", "state=failing", "state=never", "state=expired"]),
    (McpSession, ["", "q=alice"]),
]


@pytest.mark.parametrize(("model", "queries"), LISTS, ids=[m._meta.model_name for m, _ in LISTS])
def test_list_pages_render_with_filters_and_search(admin, populated, model, queries):
    for query in queries:
        response = admin.get(url(model) + "?" + query)
        assert response.status_code == 200, (query, response.status_code)


def test_change_pages_render_and_never_show_a_secret(admin, populated):
    manual = populated["manual"]
    secret = "s3cret-" + secrets.token_urlsafe(16)
    manual.client_secret = secret
    manual.hash_client_secret = False  # stored in clear: the worst case for a leak
    manual.save()
    html = admin.get(url(Application, "change", manual.pk)).content.decode()
    assert secret not in html and 'name="client_secret"' not in html
    dcr_html = admin.get(url(Application, "change", populated["dcr"].pk)).content.decode()
    assert "Dynamic Client Registration" in dcr_html and "trust verdict" in dcr_html.lower()
    for model in (Consent, AuditEvent, TrustRule, ClientMetadataDocument, McpSession):
        obj = model.objects.first()
        response = admin.get(url(model, "change", obj.pk))
        assert response.status_code == 200, model
    for token in AccessToken.objects.all():
        assert token.token_checksum not in dcr_html


# --- client actions ------------------------------------------------------------------------


# --- trust rules ---------------------------------------------------------------------------


# --- consents ------------------------------------------------------------------------------


# --- audit log -----------------------------------------------------------------------------


# --- CIMD cache ----------------------------------------------------------------------------
