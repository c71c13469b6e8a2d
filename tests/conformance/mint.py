"""Prepare the fixture database and print a bearer token for the conformance suite (run by run.py).

Creates the default protected resource, a user and a public client, and mints an access token
bound to the resource with every scope the fixture uses; prints the raw token on stdout.

For the authorization-server scenarios: the user's password is ``MCP_CONFORMANCE_PASSWORD`` (when
set; run.py makes a random one per run) and a second public client, ``conformance-authorization``,
is registered as an administrator would register a native app (RFC 8252 §7.3: the loopback redirect
URI ``http://127.0.0.1/callback``, any port), with consent asked as for any client.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta

#: The public client the suite's ``authorization-code-grant`` scenario uses (``--client-id``).
AUTHORIZATION_CLIENT_ID = "conformance-authorization"


def main() -> None:
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.conformance.settings")
    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.utils import timezone
    from oauth2_provider.models import get_access_token_model, get_application_model, set_token_value

    from mcp_oauth.resource_server.default_resource import ensure_default_resource

    call_command("migrate", verbosity=0, interactive=False)
    resource = ensure_default_resource()
    user, _ = get_user_model().objects.get_or_create(username="conformance")
    if os.environ.get("MCP_CONFORMANCE_PASSWORD"):
        user.set_password(os.environ["MCP_CONFORMANCE_PASSWORD"])
        user.save()
    Application = get_application_model()
    app, _ = Application.objects.get_or_create(
        name="conformance suite",
        defaults={
            "client_type": Application.CLIENT_PUBLIC,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": "http://127.0.0.1/callback",
        },
    )
    Application.objects.get_or_create(
        client_id=AUTHORIZATION_CLIENT_ID,
        defaults={
            "name": "conformance suite (authorization server)",
            "client_type": Application.CLIENT_PUBLIC,
            "authorization_grant_type": Application.GRANT_AUTHORIZATION_CODE,
            "redirect_uris": "http://127.0.0.1/callback",
        },
    )
    raw = secrets.token_urlsafe(32)
    token = get_access_token_model()(
        user=user,
        application=app,
        scope="mcp",
        expires=timezone.now() + timedelta(hours=2),
        resource=[resource.uri],
    )
    set_token_value(token, raw)
    token.save()
    print(raw)


if __name__ == "__main__":
    main()
