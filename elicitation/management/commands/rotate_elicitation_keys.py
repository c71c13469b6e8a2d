"""``manage.py rotate_elicitation_keys``: re-encrypt every stored value under the newest key.

Rotation: put the new key first in ``ELICITATION["ENCRYPTION_KEYS"]`` (keep the old ones after
it), deploy, run this command, then remove the old keys. Values no configured key opens are
reported and left as they are (exit status 1).
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from elicitation.crypto import DecryptionError, keys_configured, rotate
from elicitation.models import StoredSecret, ThirdPartyConnection, ThirdPartyProvider

#: model -> its encrypted columns.
ENCRYPTED: dict[type[ThirdPartyConnection] | type[ThirdPartyProvider] | type[StoredSecret], tuple[str, ...]] = {
    ThirdPartyConnection: ("access_token_encrypted", "refresh_token_encrypted"),
    ThirdPartyProvider: ("client_secret_encrypted",),
    StoredSecret: ("value_encrypted",),
}


class Command(BaseCommand):
    help = "Re-encrypt third-party tokens, provider client secrets and stored secrets under the newest ELICITATION key."

    def handle(self, *args, **options):
        if not keys_configured():
            raise CommandError(
                'ELICITATION["ENCRYPTION_KEYS"] is empty or holds an invalid key: nothing can be re-encrypted.'
            )
        rotated = failed = 0
        for model, columns in ENCRYPTED.items():
            for pk in model.objects.values_list("pk", flat=True).iterator():
                with transaction.atomic():
                    row = model.objects.select_for_update().filter(pk=pk).first()
                    if row is None:
                        continue
                    try:
                        for column in columns:
                            setattr(row, column, rotate(getattr(row, column)))
                    except DecryptionError:
                        failed += 1
                        self.stderr.write(f"{model._meta.label} {pk}: no configured key opens it; left unchanged")
                        continue
                    model.objects.filter(pk=pk).update(**{column: getattr(row, column) for column in columns})
                    rotated += 1
        self.stdout.write(f"{rotated} row(s) re-encrypted under the newest key, {failed} could not be decrypted.")
        if failed:
            raise CommandError(f"{failed} row(s) could not be decrypted with the configured keys")
