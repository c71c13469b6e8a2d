"""Prepare the fixture database and print a bearer token for the conformance suite (run by run.py).

Creates the default protected resource, a user and a public client, and mints an access token
bound to the resource with every scope the fixture uses; prints the raw token on stdout.
"""

from __future__ import annotations

import os
import secrets
from datetime import timedelta


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
    Application = get_application_model()
    app, _ = Application.objects.get_or_create(
        name="conformance suite",
        defaults={
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
