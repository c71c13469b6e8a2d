"""``manage.py erase_user_data <username>``: erase what the apps hold about a user, keeping the account.

The same removal as the account's deletion (:func:`mcp_oauth.authorization_server.user_data.erasure.erase_user_data`):
grants, tokens, consents, sessions, tasks, elicitations, connections (revoked at their provider),
stored secrets, enterprise identities and the bookkeeping of their tokens; audit rows are
anonymised. Asks for confirmation unless ``--yes``.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from mcp_oauth.authorization_server.user_data.erasure import erase_user_data


class Command(BaseCommand):
    help = "Erase the MCP data of a user (tokens, consents, sessions, tasks, connections, ...), keeping the account."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("username", help="the user's USERNAME_FIELD value")
        parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")

    def handle(self, *args: Any, username: str, yes: bool = False, **options: Any) -> None:
        User = get_user_model()
        user = User._default_manager.filter(**{User.USERNAME_FIELD: username}).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        if not yes and input(f"Erase the MCP data of {username!r}? This cannot be undone. [y/N] ").lower() != "y":
            raise CommandError("Nothing erased.")
        counts = erase_user_data(user, reason="erased")
        summary = ", ".join(f"{name} {count}" for name, count in counts.items() if count)
        self.stdout.write(f"Erased the MCP data of {username}: {summary or 'nothing to erase'}.")
