"""Consents: which user let which client act for them, and the way to take it back.

DOT keeps the tokens; a :class:`Consent` is the line an administrator (or a user-facing
page) lists and revokes: one per (user, client), refreshed every time the user approves
the client on the consent page.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.models import get_access_token_model, get_refresh_token_model
from oauth2_provider.settings import oauth2_settings


def revoke_client_tokens(application, user=None) -> int:
    """Revoke the access and refresh tokens ``application`` holds (for ``user`` only, when given).

    Refresh tokens are marked revoked (DOT keeps them as tombstones for reuse detection,
    RFC 9700 §4.14.2) and their access tokens deleted; remaining access tokens are deleted
    (RFC 7009 §2.1 semantics). The client's RFC 7592 registration access token is kept: it
    grants no access to any resource, only to the client's own registration.

    :returns: the number of tokens revoked (access tokens plus live refresh tokens).
    """
    AccessToken = get_access_token_model()
    RefreshToken = get_refresh_token_model()
    filters = {"application": application}
    if user is not None:
        filters["user"] = user
    with transaction.atomic():
        live_refresh = list(RefreshToken.objects.filter(revoked__isnull=True, **filters))
        access = AccessToken.objects.filter(**filters).exclude(scope=oauth2_settings.DCR_REGISTRATION_SCOPE)
        revoked = len(live_refresh) + access.count()
        for refresh_token in live_refresh:
            refresh_token.revoke()  # also deletes its access token
        access.delete()
    return revoked


class Consent(models.Model):
    """A user's approval of a client (the consent page's "Authorize").

    ``scope`` is the space-separated union of the scopes approved, ``resources`` the
    resource URIs (RFC 8707) they were approved for. ``revoked_at`` is set when the consent
    is revoked (its tokens are revoked with it); a later approval clears it.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="mcp_consents"
    )
    scope = models.TextField(_("scopes"), blank=True)
    resources = models.JSONField(_("resources"), default=list, blank=True)
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("The organization the user chose to act for (blank: none)."),
    )
    granted_at = models.DateTimeField(_("first granted"), default=timezone.now)
    last_granted_at = models.DateTimeField(_("last granted"), default=timezone.now, db_index=True)
    revoked_at = models.DateTimeField(_("revoked"), null=True, blank=True)

    class Meta:
        ordering = ["-last_granted_at", "-id"]
        verbose_name = _("consent")
        verbose_name_plural = _("consents")
        constraints = [
            # One consent per (user, client) outside organizations, and one per (user, client,
            # organization): a user may let a client act for organization A and, separately, for B.
            models.UniqueConstraint(
                fields=["user", "application"],
                condition=models.Q(organization__isnull=True),
                name="mcp_oauth_one_consent_per_client",
            ),
            models.UniqueConstraint(
                fields=["user", "application", "organization"],
                condition=models.Q(organization__isnull=False),
                name="mcp_oauth_one_consent_per_client_and_organization",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.user} → {self.application}"

    @classmethod
    def record_grant(cls, user, application, scopes, resource: str | None = None, organization=None) -> Consent:
        """Create or refresh the consent of ``user`` for ``application`` (acting for
        ``organization``, an :class:`~mcp_oauth.models.Organization` or None) after an approval.

        :param scopes: the approved scopes (iterable of names, or a space-separated string).
        :param resource: the resource URI the approval was for, if any.
        """
        if isinstance(scopes, str):
            scopes = scopes.split()
        now = timezone.now()
        with transaction.atomic():
            consent, created = cls.objects.select_for_update().get_or_create(
                user=user,
                application=application,
                organization=organization,
                defaults={
                    "scope": " ".join(sorted(set(scopes))),
                    "resources": [resource] if resource else [],
                    "granted_at": now,
                    "last_granted_at": now,
                },
            )
            if not created:
                if consent.revoked_at is not None:
                    consent.scope, consent.resources, consent.granted_at = "", [], now
                consent.scope = " ".join(sorted(set(consent.scope.split()) | set(scopes)))
                if resource and resource not in consent.resources:
                    consent.resources = [*consent.resources, resource]
                consent.last_granted_at = now
                consent.revoked_at = None
                consent.save()
        return consent

    def revoke(self) -> int:
        """Revoke this consent and the tokens the client holds for this user.

        :returns: the number of tokens revoked (see :func:`revoke_client_tokens`).
        """
        count = revoke_client_tokens(self.application, user=self.user)
        self.revoked_at = timezone.now()
        self.save(update_fields=["revoked_at"])
        return count
