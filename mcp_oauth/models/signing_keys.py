"""The authorization server's keys for signing JWT access tokens (RFC 9068), and their rotation.

One :class:`AccessTokenSigningKey` row per key. A key is *published* (in the JWKS at ``jwks_uri``,
RFC 8414 §2) from its creation until ``retire_at``; it *signs* from ``signs_from`` on, the newest
such key signing alone. Rotation (``manage.py rotate_access_token_keys``,
:mod:`mcp_oauth.authorization_server.tokens.signing_keys`) creates the next key with ``signs_from``
in the future (so that every resource server has fetched it before a token signed with it
arrives) and sets the previous key's ``retire_at`` past the longest access-token lifetime after
that (so that its last tokens still verify).

The private key is kept encrypted (Fernet, AES-128-CBC + HMAC-SHA256) under a key derived from the
site's ``MCP_OAUTH["ACCESS_TOKEN_KEY_ENCRYPTION_KEYS"]`` (else ``SECRET_KEY``): a copy of the
database alone does not sign tokens.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _


class AccessTokenSigningKeyQuerySet(models.QuerySet):
    def published(self, now=None) -> AccessTokenSigningKeyQuerySet:
        """The keys in the JWKS at ``now``: not retired yet."""
        now = now or timezone.now()
        return self.filter(models.Q(retire_at__isnull=True) | models.Q(retire_at__gt=now))

    def signing(self, now=None) -> AccessTokenSigningKey | None:
        """The key that signs at ``now``: the newest published key whose ``signs_from`` has come."""
        now = now or timezone.now()
        return self.published(now).filter(signs_from__lte=now).order_by("-signs_from", "-pk").first()


class AccessTokenSigningKey(models.Model):
    """One signing key of JWT access tokens.

    ``kid``: the JWS ``kid`` (RFC 7515 §4.1.4), the key's RFC 7638 thumbprint; ``alg``: ``ES256``
    (P-256) or ``RS256`` (RSA 2048 bits or more); ``public_jwk``: the public JWK as published
    (``kty``, ``crv``/``x``/``y`` or ``n``/``e``, ``kid``, ``alg``, ``use: sig``);
    ``private_key``: the PKCS#8 PEM, Fernet-encrypted (text); ``signs_from``: when it starts signing;
    ``retire_at``: when it leaves the JWKS (None: not scheduled)."""

    class Algorithm(models.TextChoices):
        ES256 = "ES256", "ES256 (ECDSA P-256, SHA-256)"
        RS256 = "RS256", "RS256 (RSASSA-PKCS1-v1_5, SHA-256)"

    kid = models.CharField(_("key id"), max_length=64, unique=True)
    alg = models.CharField(_("algorithm"), max_length=10, choices=Algorithm.choices, default=Algorithm.ES256)
    public_jwk = models.JSONField(_("public JWK"))
    private_key = models.TextField(_("private key (encrypted)"), editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    signs_from = models.DateTimeField(_("signs from"), db_index=True)
    retire_at = models.DateTimeField(_("retired at"), null=True, blank=True, db_index=True)

    objects = AccessTokenSigningKeyQuerySet.as_manager()

    class Meta:
        verbose_name = _("access-token signing key")
        verbose_name_plural = _("access-token signing keys")
        ordering = ("-signs_from", "-pk")

    def __str__(self) -> str:
        return f"{self.alg} {self.kid}"
