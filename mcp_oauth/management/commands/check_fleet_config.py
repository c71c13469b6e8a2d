"""``manage.py check_fleet_config``: refuse to start a host whose shared secrets differ from the fleet's.

::

    manage.py check_fleet_config [--host NAME] [--no-record] [--replace]

Compares the fingerprints of this host's ``SECRET_KEY`` (with ``SECRET_KEY_FALLBACKS``), requestState
key ring, elicitation Fernet key ring, … (:func:`mcp_oauth.management.fleet.shared_secrets`) with the fleet's record
in the shared database, prints one line per setting (``recorded``, ``same`` or ``updated``) and records
this host's rings. A mismatch exits with status 1 and a message naming each mismatched setting
(:class:`mcp_oauth.management.fleet.FleetConfigMismatch`), recording nothing. Run it before a host starts serving
(``make serve`` does, in its prepare step); ``--no-record`` only compares; ``--replace`` records this
host's rings even where they do not fit (a secret changed outright on purpose: then every host needs
the new one).
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from mcp_oauth.management.fleet import FleetConfigMismatch, check_fleet_config
from mcp_oauth.models import FleetSecret

#: The longest ``--host`` the record holds (``FleetSecret.host``).
HOST_MAX_LENGTH = FleetSecret._meta.get_field("host").max_length or 255


class Command(BaseCommand):
    help = "Check that this host's shared secrets match the other hosts' (the fleet's record in the database)."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--host", default=None, help="the name recorded for this host (default: the machine's)")
        parser.add_argument(
            "--no-record", action="store_true", help="compare only; do not record this host's key rings"
        )
        parser.add_argument(
            "--replace",
            action="store_true",
            help="record this host's key rings even where they do not fit the fleet's (a secret changed outright)",
        )

    def handle(self, *args: Any, host: str | None, no_record: bool, replace: bool, **options: Any) -> None:
        if host is not None and not (0 < len(host) <= HOST_MAX_LENGTH and "\x00" not in host):
            # Stored with the record: a database error here would read as a missing migration.
            raise CommandError(f"--host must be 1 to {HOST_MAX_LENGTH} characters without a NUL byte.")
        try:
            statuses = check_fleet_config(host=host, record=not no_record, replace=replace)
        except FleetConfigMismatch as mismatch:
            raise CommandError(str(mismatch)) from mismatch
        except DatabaseError as error:
            raise CommandError(
                f"The fleet's record cannot be read ({str(error).splitlines()[0]}); run manage.py migrate first "
                "(docs/how-to/many-hosts.md)."
            ) from error
        for status in statuses:
            keys = "key" if status.keys == 1 else "keys"
            self.stdout.write(f"{status.setting}: {status.outcome} ({status.keys} {keys})")
