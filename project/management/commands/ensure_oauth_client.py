"""Create or update a confidential OAuth client of this site's authorization server.

``manage.py ensure_oauth_client --client-id ID --client-secret SECRET --redirect-uri URI [--name NAME]``

Used to let another site (or this one) connect to this site as a third-party provider
(authorization code grant, ``client_secret_basic``). The secret is stored hashed by
django-oauth-toolkit.
"""

from django.core.management.base import BaseCommand, CommandError
from oauth2_provider.models import get_application_model


class Command(BaseCommand):
    help = "Create or update a confidential authorization-code client (for the demo third-party provider)."

    def add_arguments(self, parser):
        parser.add_argument("--client-id", required=True)
        parser.add_argument("--client-secret", required=True)
        parser.add_argument("--redirect-uri", required=True, action="append", help="repeat for several")
        parser.add_argument("--name", default="Demo third-party connection")

    def handle(self, *args, client_id, client_secret, redirect_uri, name, **options):
        if len(client_secret) < 16:
            raise CommandError("--client-secret must have at least 16 characters")
        Application = get_application_model()
        app = Application.objects.filter(client_id=client_id).first() or Application(client_id=client_id)
        app.name = name
        app.client_type = Application.CLIENT_CONFIDENTIAL
        app.authorization_grant_type = Application.GRANT_AUTHORIZATION_CODE
        app.redirect_uris = " ".join(redirect_uri)
        app.client_secret = client_secret  # hashed on save
        app.hash_client_secret = True
        app.skip_authorization = False
        app.full_clean(exclude=["user"])
        app.save()
        self.stdout.write(f"OAuth client {client_id!r} ready ({', '.join(redirect_uri)}).")
