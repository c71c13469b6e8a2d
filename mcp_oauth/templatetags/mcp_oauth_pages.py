"""Template tags for pages around the authorization flow: ``{% load mcp_oauth_pages %}``.

``{% authorization_request next as auth %}`` reads the authorization request a login page was
sent with (its ``next``) and gives what the page should say: which application is asking and for
which site. Nothing is fetched (a CIMD client not seen yet is named by its ``client_id`` host).
"""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from django import template
from django.urls import NoReverseMatch, reverse
from oauth2_provider.models import get_application_model

from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.settings import mcp_oauth_settings

register = template.Library()


@register.simple_tag(takes_context=True)
def authorization_request(context, next_url) -> dict | None:
    """What ``next_url`` asks, when it is this site's authorization endpoint; else None.

    :returns: ``{"client_name": str or None, "client_id_host": str or None, "registration_source":
        "manual" / "cimd" / "dcr" / None, "site_name": str, "site_host": str}``; ``client_name`` is None
        for a client this site does not know yet.
    """
    if not isinstance(next_url, str) or not next_url:
        return None
    parts = urlsplit(next_url)
    try:
        endpoint = reverse("oauth2_provider:authorize")
    except NoReverseMatch:
        return None
    if parts.scheme or parts.netloc or parts.path.rstrip("/") != endpoint.rstrip("/"):
        return None
    query = parse_qs(parts.query)
    client_ids = query.get("client_id") or []
    if len(client_ids) != 1 or not client_ids[0] or len(client_ids[0]) > 2000:
        return None
    client_id = client_ids[0]
    try:
        application = get_application_model().objects.filter(client_id=client_id).first()
    except ValueError:
        application = None
    client_id_host = urlsplit(client_id).hostname if client_id.startswith("https://") else None
    try:
        resource = select_resource(query.get("resource") or [])
    except InvalidTarget:
        resource = None
    base = urlsplit(mcp_oauth_settings.BASE_URL)
    site_host = base.netloc
    if not site_host and context.get("request") is not None:
        site_host = context["request"].get_host()
    return {
        "client_name": (application.name or None) if application is not None else None,
        "client_id_host": client_id_host,
        "registration_source": getattr(application, "registration_source", None) if application is not None else None,
        "site_name": (resource.name if resource is not None and resource.name else "") or site_host,
        "site_host": site_host,
    }
