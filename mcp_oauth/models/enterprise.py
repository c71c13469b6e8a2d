"""Signed-assertion tables: used ``jti`` values, trusted enterprise identity providers, linked identities.

* :class:`UsedAssertion` — one row per accepted JWT assertion (``private_key_jwt`` client
  assertions, RFC 7523 §2.2; ID-JAGs, RFC 7523 §2.1): its ``iss`` + ``jti`` hashed, kept until
  the assertion expires. The unique key refuses a replay in every worker and process, SQLite
  included (RFC 7523 §3 item 7).
* :class:`EnterpriseIdentityProvider` — an IdP whose Identity Assertion JWT Authorization Grants
  (ID-JAG, draft-ietf-oauth-identity-assertion-authz-grant; MCP ext-auth "Enterprise-Managed
  Authorization") this authorization server redeems.
* :class:`EnterpriseIdentity` — the link ``(provider, sub)`` → local user (ext-auth §4.3: ``iss``
  + ``sub`` is unique).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.models.core import ProtectedResource

#: Algorithms an IdP may sign ID-JAGs with unless its row says otherwise (never ``none``, never HS*).
DEFAULT_IDP_ALGORITHMS = "RS256 PS256 ES256 EdDSA"


class UsedAssertion(models.Model):
    """An accepted JWT assertion, kept until ``expires_at`` to refuse its replay.

    ``key`` is the SHA-256 (hex) of ``"<iss>\\n<jti>"``; ``kind`` is ``client_assertion`` or ``id_jag``.
    """

    key = models.CharField(max_length=64, unique=True)
    kind = models.CharField(max_length=20)
    issuer = models.CharField(max_length=255)
    expires_at = models.DateTimeField(db_index=True)
    used_at = models.DateTimeField(default=timezone.now)

    class Meta:
        verbose_name = _("used assertion")
        verbose_name_plural = _("used assertions")


class EnterpriseIdentityProvider(models.Model):
    """A trusted enterprise IdP for Enterprise-Managed Authorization (ID-JAG, RFC 7523 jwt-bearer grant).

    Its ID-JAGs are accepted only from ``allowed_clients`` and only for ``allowed_resources``;
    the access token's scopes are the intersection of the request's ``scope``, the ID-JAG's
    ``scope`` and ``allowed_scopes`` (blank: no limit of its own). ``user_policy`` says what
    happens to a ``sub`` not linked to a local user yet.
    """

    class UserPolicy(models.TextChoices):
        LINKED_ONLY = "linked", _("only identities an administrator linked")
        MATCH_EMAIL = "match_email", _("link to the existing user with the same e-mail address")
        CREATE = "create", _("link by e-mail address, or create the user")

    name = models.CharField(_("name"), max_length=200)
    issuer = models.CharField(
        _("issuer"),
        max_length=255,
        unique=True,
        help_text=_("The IdP's issuer URL, exactly as its ID-JAGs carry it in iss."),
    )
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("Blank: any organization. Set: its ID-JAGs yield tokens for that organization alone."),
    )
    jwks_uri = models.URLField(
        _("JWKS URL"),
        max_length=500,
        blank=True,
        help_text=_("https URL of the IdP's JSON Web Key Set; fetched with the SSRF rules of CIMD and cached."),
    )
    jwks = models.JSONField(
        _("JWKS"), null=True, blank=True, help_text=_("Public keys inline (a JWK Set), instead of a JWKS URL.")
    )
    algorithms = models.CharField(
        _("allowed algorithms"),
        max_length=200,
        default=DEFAULT_IDP_ALGORITHMS,
        help_text=_("Space-separated JWS algorithms, e.g. RS256 ES256 (never none or HS*)."),
    )
    allowed_clients = models.ManyToManyField(
        oauth2_settings.APPLICATION_MODEL,
        blank=True,
        related_name="+",
        verbose_name=_("allowed clients"),
        help_text=_("Clients that may redeem this IdP's ID-JAGs (the client_id claim must name the client)."),
    )
    allowed_resources = models.ManyToManyField(
        ProtectedResource,
        blank=True,
        related_name="+",
        verbose_name=_("allowed resources"),
        help_text=_("Resources this IdP's ID-JAGs may be redeemed for (the resource claim)."),
    )
    allowed_scopes = models.CharField(
        _("allowed scopes"), max_length=500, blank=True, help_text=_("Space-separated; blank: no limit of its own.")
    )
    user_policy = models.CharField(
        _("unknown subjects"), max_length=20, choices=UserPolicy.choices, default=UserPolicy.LINKED_ONLY
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = _("enterprise identity provider")
        verbose_name_plural = _("enterprise identity providers")
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name or self.issuer

    @property
    def algorithm_list(self) -> list[str]:
        return self.algorithms.split()

    @property
    def scope_list(self) -> list[str]:
        return self.allowed_scopes.split()


class EnterpriseIdentity(models.Model):
    """The local user an IdP's subject (``sub``) stands for."""

    provider = models.ForeignKey(EnterpriseIdentityProvider, on_delete=models.CASCADE, related_name="identities")
    subject = models.CharField(_("subject (sub)"), max_length=255)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name = _("enterprise identity")
        verbose_name_plural = _("enterprise identities")
        constraints = [
            models.UniqueConstraint(fields=["provider", "subject"], name="mcp_oauth_one_user_per_idp_subject")
        ]

    def __str__(self) -> str:
        return f"{self.subject} @ {self.provider}"
