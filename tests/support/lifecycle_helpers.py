"""A user with a row in every table the two apps keep about a person, and the query per table
that finds what is left of them (issues 28 and 34: deletion and erasure leave nothing)."""

from __future__ import annotations

import hashlib
import threading
import time
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.test import Client
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_grant_model,
    get_id_token_model,
    get_refresh_token_model,
)

from elicitation.models import Elicitation, StoredSecret, ThirdPartyConnection, ThirdPartyProvider
from mcp_oauth.models import (
    AuditEvent,
    Consent,
    DPoPBinding,
    EnterpriseIdentity,
    EnterpriseIdentityProvider,
    McpSession,
    McpSessionEvent,
    McpTask,
    RedeemedAuthorizationCode,
    RefreshGeneration,
    RefreshTokenGeneration,
    ResourceSubscription,
)
from tests.support.oauth_helpers import get_code, token_request


class RevocationEndpoint:
    """An RFC 7009 revocation endpoint on loopback that records the tokens it was sent."""

    def __init__(self, delay: float = 0.0) -> None:
        received: list[str] = []
        self.received = received
        self.arrived = threading.Event()

        arrived = self.arrived

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)).decode()
                time.sleep(delay)
                received.append(body)
                arrived.set()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/revoke"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def populate(user, other_user, app, resource, revocation_url: str, *, task_status: str = "working") -> dict:
    """Give ``user`` a row in every table; returns what :func:`leftovers` needs (token families, checksums)."""
    browser = Client()
    browser.force_login(user)
    code, verifier, _ = get_code(browser, app, scope="mcp offline_access")
    response = token_request(Client(), app, code, verifier)
    assert response.status_code == 200, response.content
    get_code(browser, app)  # a pending authorization code
    AccessToken, RefreshToken = get_access_token_model(), get_refresh_token_model()
    access = AccessToken.objects.filter(user=user).first()
    refresh = RefreshToken.objects.filter(user=user).first()
    assert refresh is not None and refresh.token_family is not None
    families = [refresh.token_family]
    DPoPBinding.objects.create(token_checksum=access.token_checksum, jkt="k" * 43, token_kind="access_token")
    DPoPBinding.objects.create(token_checksum=refresh.token_checksum, jkt="k" * 43, token_kind="refresh_token")
    assert RedeemedAuthorizationCode.objects.filter(token_family=refresh.token_family).exists()
    assert RefreshGeneration.objects.filter(token_family=refresh.token_family).exists()
    get_id_token_model().objects.create(
        user=user,
        application=app,
        jti="2b4f1c6e-0000-4000-8000-000000000001",
        expires=timezone.now() + timedelta(hours=1),
    )
    session = McpSession.objects.create(user=user, application=app, resource=resource, protocol_version="2025-11-25")
    McpSessionEvent.objects.create(session=session, message={"jsonrpc": "2.0", "method": "notifications/x"})
    ResourceSubscription.objects.create(session=session, uri="notes://1")
    McpTask.objects.create(
        tool_name="slow",
        user=user,
        application=app,
        resource=resource,
        protocol_version="2026-07-28",
        status=task_status,
        lease="held" if task_status == "working" else "",
    )
    idp = EnterpriseIdentityProvider.objects.create(name="Acme", issuer="https://idp.example.com")
    EnterpriseIdentity.objects.create(provider=idp, subject="U1", user=user)
    provider = ThirdPartyProvider(
        slug="docs",
        name="Docs",
        authorization_endpoint="https://docs.example.com/authorize",
        token_endpoint="https://docs.example.com/token",
        revocation_endpoint=revocation_url,
        client_id="site",
        token_endpoint_auth_method=ThirdPartyProvider.AuthMethod.CLIENT_SECRET_POST,
    )
    provider.client_secret = "provider-secret"
    provider.save()
    connection = ThirdPartyConnection(user=user, provider=provider, scopes="read", account_label="alice@docs")
    connection.access_token = "provider-access-token"
    connection.refresh_token = "provider-refresh-token"
    connection.save()
    secret = StoredSecret(user=user, name="API_KEY")
    secret.value = "sk-live-123"
    secret.save()
    Elicitation.objects.create(
        user=user, session=session, message="Your name?", status="accepted", content={"name": "A"}
    )
    Elicitation.objects.create(user=user, mode="url", kind="connect", provider=provider, message="Connect Docs")
    # Audit rows about them: their own (with an IP) and another user's that names them.
    AuditEvent.objects.create(
        kind="consent.granted", user=user, ip_address="203.0.113.7", detail={"user_id": str(user.pk)}
    )
    AuditEvent.objects.create(
        kind="identity.mismatch", user=other_user, ip_address="198.51.100.1", detail={"expected_user": user.pk}
    )
    return {"families": families, "checksums": [access.token_checksum, refresh.token_checksum]}


def leftovers(user_pk, state: dict) -> dict[str, int]:
    """One query per table: the rows still keyed to the person (empty when nothing is left)."""
    families, checksums = state["families"], state["checksums"]
    found = {
        "grants": get_grant_model().objects.filter(user_id=user_pk).count(),
        "access_tokens": get_access_token_model().objects.filter(user_id=user_pk).count(),
        "refresh_tokens": get_refresh_token_model().objects.filter(user_id=user_pk).count(),
        "id_tokens": get_id_token_model().objects.filter(user_id=user_pk).count(),
        "consents": Consent.objects.filter(user_id=user_pk).count(),
        "sessions": McpSession.objects.filter(user_id=user_pk).count(),
        "session_events": McpSessionEvent.objects.filter(session__user_id=user_pk).count()
        + McpSessionEvent.objects.filter(session__isnull=True).count(),
        "subscriptions": ResourceSubscription.objects.filter(uri="notes://1").count(),
        "tasks": McpTask.objects.filter(user_id=user_pk).count(),
        "enterprise_identities": EnterpriseIdentity.objects.filter(user_id=user_pk).count(),
        "dpop_bindings": DPoPBinding.objects.filter(token_checksum__in=checksums).count(),
        "refresh_generations": RefreshGeneration.objects.filter(token_family__in=families).count(),
        "refresh_generation_members": RefreshTokenGeneration.objects.filter(
            generation__token_family__in=families
        ).count(),
        "redeemed_codes": RedeemedAuthorizationCode.objects.filter(token_family__in=families).count(),
        "elicitations": Elicitation.objects.filter(user_id=user_pk).count(),
        "third_party_connections": ThirdPartyConnection.objects.filter(user_id=user_pk).count(),
        "stored_secrets": StoredSecret.objects.filter(user_id=user_pk).count(),
        "audit_user_link": AuditEvent.objects.filter(user_id=user_pk).count(),
        "audit_detail_user_id": AuditEvent.objects.filter(detail__user_id=str(user_pk)).count()
        + AuditEvent.objects.filter(detail__expected_user=user_pk).count(),
        "audit_ip": AuditEvent.objects.filter(ip_address="203.0.113.7").count(),
    }
    return {table: count for table, count in found.items() if count}


def checksum(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()
