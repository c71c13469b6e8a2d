"""What the server asked users (MCP 2025-11-25 "Elicitation", SEP-1036) and what it holds for them.

* :class:`Elicitation`: one form or URL elicitation and its outcome.
* :class:`ThirdPartyProvider`: an OAuth 2.x authorization server this site connects to on its
  users' behalf (the site is an OAuth client there).
* :class:`ThirdPartyConnection`: one user's tokens at one provider, encrypted at rest.
* :class:`StoredSecret`: a sensitive value a user typed into the secure input page, encrypted.

Encrypted columns end in ``_encrypted`` and are read and written through properties
(:mod:`elicitation.crypto`); a value that no configured key opens raises
:class:`~elicitation.crypto.DecryptionError`.
"""

from __future__ import annotations

import secrets
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings

from elicitation import crypto
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.loopback import is_https_or_loopback


def new_elicitation_id() -> str:
    """An unguessable ``elicitation_id``: 192 random bits, URL-safe (32 characters)."""
    return secrets.token_urlsafe(24)


def validate_endpoint_url(value: str) -> None:
    """An https URL, or http on a loopback host (development); no userinfo, no fragment.

    :raises ValidationError: anything else.
    """
    if not value:
        return
    if not is_https_or_loopback(value):
        raise ValidationError(_("Use an https URL (http only on a loopback host)."), code="scheme")
    parts = urlsplit(value)
    if parts.username is not None or parts.password is not None or parts.fragment:
        raise ValidationError(_("The URL must not carry credentials or a fragment."), code="url")


class Elicitation(models.Model):
    """One ``elicitation/create`` request (or ``-32042`` elicitation) and its outcome.

    Form mode: ``requested_schema`` and, once accepted, ``content`` (the validated
    answer; never secrets: form mode MUST NOT be used for sensitive information).

    URL mode (SEP-1036): ``kind`` says what the start page does: ``connect`` (authorize
    ``provider`` for ``scopes``), ``secret`` (the secure input page stores a value named
    ``secret_name``) or ``external`` (the verified user is sent to ``target_url``, and the
    site calls :func:`elicitation.service.complete_elicitation` when done, e.g. from a payment
    webhook). The link the client opens is :attr:`url`; only ``user`` may use it, and the
    completion notification goes only to ``session``.

    Status: ``pending`` (sent, no outcome yet), ``accepted`` (form answer stored),
    ``declined`` / ``cancelled`` (the user's action, or ``cancelled`` when the client
    answered with an error or the call was cancelled), ``invalid`` (form content that does
    not match the schema), ``completed`` (URL mode: the out-of-band interaction finished),
    ``failed`` (URL mode: the third party refused or broke the connection, e.g. its token
    endpoint failed the code exchange; ``error`` says why, e.g. ``provider: invalid_grant``),
    ``expired`` (no outcome in time). A URL elicitation that ends unsuccessfully at the provider
    (``declined`` by ``access_denied``, or ``failed``) is reported once to the asking tool call:
    ``reported_at`` is when (a 2025-11-25 retry, which has no ``requestState`` to find it by).
    """

    class Mode(models.TextChoices):
        FORM = "form", _("form")
        URL = "url", _("URL")

    class Kind(models.TextChoices):
        FORM = "", _("form")
        CONNECT = "connect", _("connect a third-party account")
        SECRET = "secret", _("secure input")
        EXTERNAL = "external", _("external page")

    class Status(models.TextChoices):
        PENDING = "pending", _("pending")
        ACCEPTED = "accepted", _("accepted")
        DECLINED = "declined", _("declined")
        CANCELLED = "cancelled", _("cancelled")
        INVALID = "invalid", _("invalid answer")
        COMPLETED = "completed", _("completed")
        FAILED = "failed", _("failed")
        EXPIRED = "expired", _("expired")

    elicitation_id = models.CharField(
        _("elicitation id"), max_length=64, unique=True, default=new_elicitation_id, editable=False
    )
    mode = models.CharField(_("mode"), max_length=8, choices=Mode.choices, default=Mode.FORM)
    kind = models.CharField(_("kind"), max_length=16, choices=Kind.choices, default=Kind.FORM, blank=True)
    message = models.TextField(_("message"))
    requested_schema = models.JSONField(_("requested schema"), default=dict, blank=True)
    provider = models.ForeignKey(
        "elicitation.ThirdPartyProvider", null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    scopes = models.CharField(_("scopes"), max_length=500, blank=True, help_text=_("space-separated"))
    secret_name = models.CharField(_("secret name"), max_length=100, blank=True)
    tool_name = models.CharField(
        _("tool"), max_length=128, blank=True, help_text=_("the tool that asked (shown on the secure input page)")
    )
    target_url = models.URLField(_("target URL"), max_length=2000, blank=True)
    status = models.CharField(_("status"), max_length=16, choices=Status.choices, default=Status.PENDING, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    session = models.ForeignKey(
        "mcp_oauth.McpSession", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text=_("the OAuth client whose token asked (the pages name it as the consent page does)"),
    )
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("the organization the asking token acts for"),
    )
    request_id = models.CharField(
        _("tools/call request id"), max_length=200, blank=True, help_text=_("JSON of the JSON-RPC id")
    )
    content = models.JSONField(_("accepted content"), null=True, blank=True)
    client_answer = models.JSONField(
        _("client answer (in transit)"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("the client's JSON-RPC answer when it reached another worker; cleared once read"),
    )
    client_answered_at = models.DateTimeField(
        _("client answered"),
        null=True,
        blank=True,
        editable=False,
        help_text=_(
            "when the row stopped taking the client's answer: its first one was recorded, or the tool stopped waiting"
        ),
    )
    error = models.CharField(_("error"), max_length=500, blank=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    expires_at = models.DateTimeField(_("expires"), null=True, blank=True, db_index=True)
    completed_at = models.DateTimeField(_("finished"), null=True, blank=True)
    notified_at = models.DateTimeField(
        _("completion notified"),
        null=True,
        blank=True,
        help_text=_("when notifications/elicitation/complete was put in the session's outbox"),
    )

    reported_at = models.DateTimeField(
        _("failure reported"),
        null=True,
        blank=True,
        editable=False,
        help_text=_("when the provider's refusal or failure was told to the asking tool call (a 2025-11-25 retry)"),
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = _("elicitation")
        verbose_name_plural = _("elicitations")

    def __str__(self) -> str:
        return f"{self.mode} elicitation {self.elicitation_id[:8]}… ({self.status})"

    @property
    def url(self) -> str:
        """The server's own start page for this elicitation (URL mode), absolute, from ``BASE_URL``."""
        return mcp_oauth_settings.absolute(reverse("elicitation:start", args=[self.elicitation_id]))

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()


class ThirdPartyProvider(models.Model):
    """An OAuth 2.x authorization server the site connects to on its users' behalf.

    The site is a client there, registered by the administrator (``client_id`` and,
    for a confidential client, ``client_secret``, stored encrypted). Endpoints come
    from RFC 8414 discovery of ``issuer`` (admin action) or are given. The redirect
    URI to register at the provider is :attr:`redirect_uri` (one per provider, a
    mix-up defence, RFC 9700 §4.4.2). PKCE S256 is always sent unless ``use_pkce``
    is off (only for a confidential client whose provider lacks PKCE).
    """

    class AuthMethod(models.TextChoices):
        CLIENT_SECRET_BASIC = "client_secret_basic", "client_secret_basic"
        CLIENT_SECRET_POST = "client_secret_post", "client_secret_post"
        NONE = "none", _("none (public client)")

    slug = models.SlugField(_("slug"), max_length=50, unique=True, help_text=_("what tools name it by"))
    name = models.CharField(_("name"), max_length=100)
    issuer = models.URLField(
        _("issuer"),
        max_length=500,
        blank=True,
        validators=[validate_endpoint_url],
        help_text=_("RFC 8414 issuer; its iss (RFC 9207) is checked on the callback"),
    )
    authorization_endpoint = models.URLField(
        _("authorization endpoint"), max_length=500, blank=True, validators=[validate_endpoint_url]
    )
    token_endpoint = models.URLField(
        _("token endpoint"), max_length=500, blank=True, validators=[validate_endpoint_url]
    )
    revocation_endpoint = models.URLField(
        _("revocation endpoint"), max_length=500, blank=True, validators=[validate_endpoint_url]
    )
    userinfo_endpoint = models.URLField(
        _("account endpoint"),
        max_length=500,
        blank=True,
        validators=[validate_endpoint_url],
        help_text=_("optional JSON endpoint read with the new token to label the account"),
    )
    iss_parameter_supported = models.BooleanField(
        _("iss parameter required"),
        default=False,
        help_text=_("RFC 9207: the provider sends iss on its redirects (refuse callbacks without it)"),
    )
    client_id = models.CharField(_("client ID"), max_length=255)
    client_secret_encrypted = models.TextField(_("client secret (encrypted)"), blank=True, editable=False)
    token_endpoint_auth_method = models.CharField(
        _("token endpoint auth method"),
        max_length=32,
        choices=AuthMethod.choices,
        default=AuthMethod.CLIENT_SECRET_BASIC,
    )
    scopes = models.CharField(_("default scopes"), max_length=500, blank=True, help_text=_("space-separated"))
    resource = models.URLField(
        _("resource"), max_length=500, blank=True, help_text=_("RFC 8707 resource to ask tokens for (optional)")
    )
    use_pkce = models.BooleanField(_("use PKCE (S256)"), default=True)
    enabled = models.BooleanField(_("enabled"), default=True)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["name"]
        verbose_name = _("third-party provider")
        verbose_name_plural = _("third-party providers")

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.enabled and not (self.authorization_endpoint and self.token_endpoint):
            raise ValidationError(
                _("An enabled provider needs its authorization and token endpoints (or discover them from the issuer).")
            )
        if self.token_endpoint_auth_method == self.AuthMethod.NONE and not self.use_pkce:
            raise ValidationError(_("A public client must use PKCE."))

    @property
    def client_secret(self) -> str:
        """The decrypted client secret ("" for none). :raises DecryptionError:"""
        return crypto.decrypt(self.client_secret_encrypted)

    @client_secret.setter
    def client_secret(self, value: str) -> None:
        self.client_secret_encrypted = crypto.encrypt(value or "")

    @property
    def redirect_uri(self) -> str:
        """The callback URL to register at the provider (absolute, from ``MCP_OAUTH["BASE_URL"]``)."""
        return mcp_oauth_settings.absolute(reverse("elicitation:callback", args=[self.slug]))

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()

    @property
    def host(self) -> str:
        """Host of the authorization endpoint (what the user's browser will be sent to)."""
        return urlsplit(self.authorization_endpoint or self.issuer).netloc


class ThirdPartyConnection(models.Model):
    """One user's tokens at one provider, encrypted at rest; refreshed on use.

    ``access_token`` / ``refresh_token`` are properties that decrypt (raising
    :class:`~elicitation.crypto.DecryptionError` when no key opens them); the columns
    hold Fernet tokens only, never shown in the admin.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    provider = models.ForeignKey(ThirdPartyProvider, on_delete=models.CASCADE, related_name="connections")
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_(
            "Set: made (and used since) only for this organization; removed when the user leaves it. "
            "Blank: made or used outside any one organization."
        ),
    )
    access_token_encrypted = models.TextField(_("access token (encrypted)"), editable=False)
    refresh_token_encrypted = models.TextField(_("refresh token (encrypted)"), blank=True, editable=False)
    token_type = models.CharField(_("token type"), max_length=40, default="Bearer")
    expires_at = models.DateTimeField(_("access token expires"), null=True, blank=True)
    scopes = models.CharField(_("granted scopes"), max_length=500, blank=True)
    account_label = models.CharField(_("account"), max_length=200, blank=True)
    created_at = models.DateTimeField(_("connected"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [
            models.UniqueConstraint(fields=["user", "provider"], name="elicitation_one_connection_per_provider")
        ]
        verbose_name = _("third-party connection")
        verbose_name_plural = _("third-party connections")

    def __str__(self) -> str:
        label = f" ({self.account_label})" if self.account_label else ""
        return f"{self.provider} for user {self.user_id}{label}"

    @property
    def access_token(self) -> str:
        """The decrypted access token. :raises DecryptionError:"""
        return crypto.decrypt(self.access_token_encrypted)

    @access_token.setter
    def access_token(self, value: str) -> None:
        self.access_token_encrypted = crypto.encrypt(value)

    @property
    def refresh_token(self) -> str:
        """The decrypted refresh token ("" for none). :raises DecryptionError:"""
        return crypto.decrypt(self.refresh_token_encrypted)

    @refresh_token.setter
    def refresh_token(self, value: str) -> None:
        self.refresh_token_encrypted = crypto.encrypt(value or "")

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()

    def covers(self, scopes) -> bool:
        """Whether the granted scopes include every one of ``scopes``."""
        return set(scopes) <= set(self.scope_list)


class StoredSecret(models.Model):
    """A sensitive value (an API key, say) a user typed into the secure input page; encrypted."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(_("name"), max_length=100)
    value_encrypted = models.TextField(_("value (encrypted)"), editable=False)
    created_at = models.DateTimeField(_("created"), auto_now_add=True)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    class Meta:
        ordering = ["-updated_at"]
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="elicitation_one_secret_per_name")]
        verbose_name = _("stored secret")
        verbose_name_plural = _("stored secrets")

    def __str__(self) -> str:
        return f"{self.name} of user {self.user_id}"

    @property
    def value(self) -> str:
        """The decrypted value. :raises DecryptionError:"""
        return crypto.decrypt(self.value_encrypted)

    @value.setter
    def value(self, value: str) -> None:
        self.value_encrypted = crypto.encrypt(value)
