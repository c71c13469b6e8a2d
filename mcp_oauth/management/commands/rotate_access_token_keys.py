"""``manage.py rotate_access_token_keys``: the next JWT access-token signing key (RFC 9068).

::

    manage.py rotate_access_token_keys [--alg ES256|RS256] [--publish-seconds N] [--prune] [--reencrypt] [--list]

Creates the next key: published at once in the JWK Set, signing ``--publish-seconds`` later
(default ``JWT_ACCESS_TOKEN_PUBLISH_SECONDS``); the keys it replaces are retired (leave the JWK Set)
that long plus the longest access-token lifetime after now. The first key of a site signs at once.
``--prune`` deletes the rows of retired keys; ``--reencrypt`` encrypts every private key again under
the first of ``JWT_ACCESS_TOKEN_ENCRYPTION_KEYS`` (or ``SECRET_KEY``); ``--list`` prints the keys and
does nothing else. Schedule: run it from cron or Celery beat, e.g. every 30 days, with ``--prune``.
"""

from __future__ import annotations

from typing import Any

from cryptography.fernet import InvalidToken
from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from mcp_oauth.authorization_server.tokens import signing_keys
from mcp_oauth.models import AccessTokenSigningKey


class Command(BaseCommand):
    help = "Create the next JWT access-token signing key; retire the current one after the overlap."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--alg", choices=["ES256", "RS256"], default=None, help="algorithm of the new key")
        parser.add_argument(
            "--publish-seconds", type=int, default=None, help="seconds the key is published before it signs"
        )
        parser.add_argument("--prune", action="store_true", help="also delete the rows of retired keys")
        parser.add_argument("--reencrypt", action="store_true", help="only re-encrypt the private keys")
        parser.add_argument("--list", action="store_true", help="only list the keys")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["list"]:
            self._list()
            return
        if options["reencrypt"]:
            try:
                count = signing_keys.reencrypt()
            except InvalidToken:
                raise CommandError("a private key cannot be decrypted with the configured secrets") from None
            self.stdout.write(f"re-encrypted {count} keys")
            return
        publish = options["publish_seconds"]
        if publish is not None and publish < 0:
            raise CommandError("--publish-seconds must be at least 0")
        created, retiring = signing_keys.rotate(alg=options["alg"], publish_seconds=publish)
        self.stdout.write(f"created {created.alg} key {created.kid}, signing from {created.signs_from.isoformat()}")
        for key in retiring:
            self.stdout.write(f"key {key.kid} retires at {key.retire_at}")
        if options["prune"]:
            self.stdout.write(f"pruned {signing_keys.prune()} retired keys")

    def _list(self) -> None:
        now = timezone.now()
        for key in AccessTokenSigningKey.objects.all():
            state = "retired" if key.retire_at and key.retire_at <= now else "published"
            if state == "published" and key.signs_from <= now:
                state = "published, signs"
            retire = key.retire_at.isoformat() if key.retire_at else "-"
            self.stdout.write(
                f"{key.kid}  {key.alg}  signs from {key.signs_from.isoformat()}  retires {retire}  {state}"
            )
