"""Create (or reset the password of) the demo user: ``manage.py ensure_demo_user``.

Reads DEMO_USERNAME (default "demo") and DEMO_PASSWORD (default "demo-password")
from the environment, or --username/--password. The password is set only when it differs: a
password change revokes the user's tokens, and ``make run`` runs this at every start, which would
sign every connected MCP client out.
"""

import os

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Create or update the demo user (DEMO_USERNAME / DEMO_PASSWORD)."

    def add_arguments(self, parser):
        parser.add_argument("--username", default=os.environ.get("DEMO_USERNAME", "demo"))
        parser.add_argument("--password", default=os.environ.get("DEMO_PASSWORD", "demo-password"))
        parser.add_argument("--superuser", action="store_true", help="also give admin access")

    def handle(self, *args, username, password, superuser, **options):
        User = get_user_model()
        user, created = User.objects.get_or_create(username=username, defaults={"email": f"{username}@example.com"})
        if created or not user.check_password(password):
            user.set_password(password)
        user.is_active = True
        if superuser:
            user.is_staff = user.is_superuser = True
        user.save()
        self.stdout.write(f"{'Created' if created else 'Updated'} user {username!r}.")
