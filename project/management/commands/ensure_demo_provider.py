"""Configure the demo third-party provider of ``demo_profile``: ``manage.py ensure_demo_provider``.

Without options, the provider is **this site itself**: a confidential OAuth client is
registered on this site's own authorization server, and a
:class:`~elicitation.models.ThirdPartyProvider` ``demo`` points at it. The whole URL-mode
flow (start page, consent, callback, stored connection, ``/api/profile`` read with the
third-party token) then runs on one machine with no outside network (``make run`` does this).

With ``--issuer URL --client-id ID --client-secret SECRET``, the provider is another
instance of this project (register the client there with ``ensure_oauth_client``, redirect URI
``<this site>/elicitation/callback/demo/``); ``--discover`` reads its endpoints from its
RFC 8414 metadata, else they are built from the issuer with this project's paths.
"""

import secrets

from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from elicitation.crypto import keys_configured
from elicitation.models import ThirdPartyProvider
from elicitation.providers import ProviderError
from elicitation.providers import discover as discover_metadata
from mcp_oauth.settings import mcp_oauth_settings
from project.apps import API_PATH, ensure_api_resource


class Command(BaseCommand):
    help = "Create or update the 'demo' third-party provider (by default: this site's own authorization server)."

    def add_arguments(self, parser):
        parser.add_argument("--slug", default="demo")
        parser.add_argument("--name", default=None)
        parser.add_argument("--issuer", default=None, help="another instance's issuer (default: this site)")
        parser.add_argument("--client-id", default=None)
        parser.add_argument("--client-secret", default=None)
        parser.add_argument("--discover", action="store_true", help="read the endpoints from the issuer's metadata")

    def handle(self, *args, slug, name, issuer, client_id, client_secret, discover: bool, **options):
        if not keys_configured():
            raise CommandError('Set ELICITATION["ENCRYPTION_KEYS"] first (the client secret is stored encrypted).')
        own = issuer is None
        issuer = (issuer or mcp_oauth_settings.issuer).rstrip("/")
        provider = ThirdPartyProvider.objects.filter(slug=slug).first() or ThirdPartyProvider(slug=slug)
        if own:
            client_id = client_id or f"{slug}-provider-client"
            client_secret = client_secret or secrets.token_urlsafe(32)
        elif not (client_id and client_secret):
            raise CommandError("--client-id and --client-secret are required with --issuer")
        provider.name = name or ("Demo provider (this site)" if own else f"Demo provider ({issuer})")
        provider.issuer = issuer
        provider.authorization_endpoint = f"{issuer}/oauth/authorize"
        provider.token_endpoint = f"{issuer}/oauth/token"
        provider.revocation_endpoint = f"{issuer}/oauth/revoke"
        provider.userinfo_endpoint = f"{issuer}/api/profile"
        provider.iss_parameter_supported = True
        provider.client_id = client_id
        provider.client_secret = client_secret
        provider.token_endpoint_auth_method = ThirdPartyProvider.AuthMethod.CLIENT_SECRET_BASIC
        provider.scopes = "profile"
        provider.resource = f"{issuer}{API_PATH}"
        provider.use_pkce = True
        provider.enabled = True
        try:
            provider.full_clean()
        except ValidationError as exc:  # e.g. BASE_URL http on a non-loopback host: nothing is created
            problems = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in exc.message_dict.items())
            raise CommandError(f"the provider would not be valid ({problems})") from None
        with transaction.atomic():  # a failed discovery leaves nothing behind
            if own:
                ensure_api_resource()
                # "--option=value": call_command would pass required options as two arguments, and
                # argparse refuses a value that starts with "-" (1 in 64 token_urlsafe secrets do).
                call_command(
                    "ensure_oauth_client",
                    f"--client-id={client_id}",
                    f"--client-secret={client_secret}",
                    f"--redirect-uri={provider.redirect_uri}",
                    f"--name={name or 'Demo provider'} connection",
                    stdout=self.stdout,
                )
            provider.save()
            if discover:
                try:
                    discover_metadata(provider)
                except ProviderError as exc:
                    raise CommandError(f"discovery failed: {exc}") from None
        self.stdout.write(f"Third-party provider {slug!r} -> {issuer} (redirect URI {provider.redirect_uri}).")
