"""Helpers shared by the URL-mode elicitation test files (tests/elicitation/, tests/attacks/test_elicitation.py)."""

from __future__ import annotations

import base64
import hashlib
import io
from urllib.parse import parse_qs, urlsplit

from django.core.management import call_command
from django.test import Client

from elicitation.models import Elicitation, ThirdPartyProvider
from mcp_oauth.models import McpSession, McpSessionEvent

SITE = "https://site.example"
URL_CAPS = {"elicitation": {"form": {}, "url": {}}}
FORM_CAPS = {"elicitation": {"form": {}}}
PASSWORD = "correct horse battery"  # of the conftest users alice and bob


def demo_provider() -> ThirdPartyProvider:
    """``manage.py ensure_demo_provider``: provider ``demo`` = this site's own authorization server."""
    call_command("ensure_demo_provider", stdout=io.StringIO())
    return ThirdPartyProvider.objects.get(slug="demo")


def open_session(user, app, resource, capabilities=URL_CAPS, protocol_version="2025-11-25") -> McpSession:
    return McpSession.objects.create(
        user=user,
        application=app,
        resource=resource,
        protocol_version=protocol_version,
        client_capabilities=capabilities,
    )


def path_of(row: Elicitation) -> str:
    return urlsplit(row.url).path


def query_of(url: str) -> dict[str, str]:
    return {key: values[0] for key, values in parse_qs(urlsplit(url).query).items()}


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


def outbox(session: McpSession) -> list[dict]:
    return list(McpSessionEvent.objects.filter(session=session).order_by("id").values_list("message", flat=True))


def refresh(row):
    row.refresh_from_db()
    return row


def start_authorization(client: Client, row: Elicitation) -> str:
    """POST ``continue`` on the start page; the ``state`` the site sent to the provider."""
    response = client.post(path_of(row), {"action": "continue"})
    assert response.status_code == 303, response.content
    return query_of(response["Location"])["state"]


def url_session(user, application, resource, **fields) -> McpSession:
    """A 2025-11-25 MCP session of ``user`` whose client declared URL-mode elicitation."""
    return McpSession.objects.create(
        user=user,
        application=application,
        resource=resource,
        protocol_version="2025-11-25",
        client_capabilities={"elicitation": {"url": {}}},
        **fields,
    )
