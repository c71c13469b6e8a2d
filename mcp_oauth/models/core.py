"""Our own tables. DOT's models are not swapped: our extras link to them one-to-one."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings

from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.origins import base_spelling
from mcp_oauth.shared.resource_uris import InvalidResource, canonicalize_resource

# DOT's models are swappable through OAUTH2_PROVIDER_<NAME>_MODEL settings, which
# DOT reads with a default; Django's migration machinery reads them without one
# whenever a model points at them. Give them the values DOT uses.
for _name in ("APPLICATION", "ACCESS_TOKEN"):
    if not hasattr(settings, f"OAUTH2_PROVIDER_{_name}_MODEL"):
        setattr(settings, f"OAUTH2_PROVIDER_{_name}_MODEL", getattr(oauth2_settings, f"{_name}_MODEL"))


class ProtectedResourceQuerySet(models.QuerySet):
    def enabled(self) -> ProtectedResourceQuerySet:
        return self.filter(enabled=True)

    def get_by_uri(self, uri: str) -> ProtectedResource:
        """The enabled resource whose canonical URI equals the canonical form of ``uri`` (on a loopback
        development site, in any loopback spelling of ``BASE_URL``'s origin: :mod:`mcp_oauth.shared.origins`).

        :raises InvalidResource: ``uri`` is not a valid resource URI.
        :raises ProtectedResource.DoesNotExist: no enabled resource has that URI.
        """
        return self.enabled().get(uri=canonicalize_resource(base_spelling(canonicalize_resource(uri))))

    def default(self) -> ProtectedResource:
        """The default resource (tokens requested without ``resource`` are bound to it).

        :raises ProtectedResource.DoesNotExist: none is marked default and enabled.
        """
        return self.enabled().get(is_default=True)


class ProtectedResource(models.Model):
    """A protected resource this site serves (RFC 9728 §2, RFC 8707 §2).

    ``uri`` is the canonical resource identifier (see :mod:`mcp_oauth.shared.resource_uris`);
    tokens are bound to it and accepted only by it. ``scopes`` are the scopes a
    client needs for it: they are published in its metadata and sent in its
    ``WWW-Authenticate`` challenges.
    """

    uri = models.CharField(
        _("resource URI"),
        max_length=255,
        unique=True,
        help_text=_("Canonical URI, e.g. https://mcp.example.com/mcp (no trailing slash, no fragment)."),
    )
    name = models.CharField(_("name"), max_length=200, blank=True)
    scopes = models.CharField(
        _("required scopes"), max_length=500, blank=True, help_text=_("Space-separated scope names.")
    )
    is_default = models.BooleanField(
        _("default"), default=False, help_text=_("Tokens requested without a resource are bound to this one.")
    )
    enabled = models.BooleanField(_("enabled"), default=True)
    documentation = models.URLField(_("documentation URL"), blank=True)
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("Set: this is the organization's own MCP endpoint; its tokens act for it alone."),
    )
    dpop_required = models.BooleanField(
        _("requires DPoP"),
        default=False,
        help_text=_(
            "Accept only DPoP-bound access tokens with a DPoP proof (RFC 9449); bearer tokens are refused "
            "and tokens for it are issued only with a proof."
        ),
    )
    # Session lengths (docs/how-to/session-lengths.md): mcp_oauth.authorization_server.tokens.lifetimes.
    access_token_lifetime = models.PositiveIntegerField(
        _("access token lifetime (seconds)"),
        null=True,
        blank=True,
        help_text=_("Blank: the site's (ACCESS_TOKEN_EXPIRE_SECONDS). A client's own lifetime wins over this one."),
    )
    jwt_access_tokens = models.BooleanField(
        _("JWT access tokens"),
        default=False,
        help_text=_(
            "Issue its access tokens as signed JWTs (RFC 9068) that a resource server verifies with the "
            "published keys, without the database; off: opaque tokens."
        ),
    )
    created = models.DateTimeField(auto_now_add=True)
    updated = models.DateTimeField(auto_now=True)

    objects = ProtectedResourceQuerySet.as_manager()

    class Meta:
        verbose_name = _("protected resource")
        verbose_name_plural = _("protected resources")
        ordering = ["uri"]
        constraints = [
            models.UniqueConstraint(
                fields=["is_default"], condition=models.Q(is_default=True), name="mcp_oauth_one_default_resource"
            )
        ]

    def __str__(self) -> str:
        return self.name or self.uri

    @property
    def scope_list(self) -> list[str]:
        return self.scopes.split()

    def clean(self) -> None:
        try:
            self.uri = canonicalize_resource(self.uri)
        except InvalidResource as exc:
            raise ValidationError({"uri": str(exc)}) from None
        unknown = set(self.scope_list) - set(oauth2_settings.SCOPES)
        if unknown:
            raise ValidationError({"scopes": _("Unknown scopes: %s") % " ".join(sorted(unknown))})

    def save(self, *args, **kwargs) -> None:
        self.uri = canonicalize_resource(self.uri)
        super().save(*args, **kwargs)


class ClientProfile(models.Model):
    """What we keep about an OAuth client beyond DOT's ``Application``.

    ``metadata`` holds the client metadata accepted at registration (RFC 7591 §2),
    echoed back in registration responses; ``client_secret_expires_at`` is 0 when
    an issued secret does not expire (RFC 7591 §3.2.1).
    """

    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="mcp_profile"
    )
    metadata = models.JSONField(_("registered metadata"), default=dict, blank=True)
    client_uri = models.URLField(_("client URI"), max_length=500, blank=True)
    logo_uri = models.URLField(_("logo URI"), max_length=500, blank=True)
    client_secret_expires_at = models.PositiveBigIntegerField(default=0)
    dpop_bound_access_tokens = models.BooleanField(
        _("DPoP-bound access tokens"),
        default=False,
        help_text=_(
            "The client always uses DPoP (RFC 9449 §5.2): token requests without a DPoP proof are refused. "
            "Also set by dpop_bound_access_tokens in its registered or CIMD metadata."
        ),
    )
    last_used_at = models.DateTimeField(_("last used"), null=True, blank=True, db_index=True)
    # private_key_jwt client authentication (RFC 7523 §2.2, RFC 7591 §2): the client's public keys.
    jwks = models.JSONField(
        _("JWKS"),
        null=True,
        blank=True,
        help_text=_("The client's public keys (a JWK Set) for private_key_jwt authentication."),
    )
    jwks_uri = models.URLField(
        _("JWKS URL"),
        max_length=500,
        blank=True,
        help_text=_("https URL of the client's JWK Set for private_key_jwt (fetched with the SSRF rules of CIMD)."),
    )

    # Session lengths (docs/how-to/session-lengths.md): mcp_oauth.authorization_server.tokens.lifetimes.
    access_token_lifetime = models.PositiveIntegerField(
        _("access token lifetime (seconds)"),
        null=True,
        blank=True,
        help_text=_("Blank: the resource's, else the site's (ACCESS_TOKEN_EXPIRE_SECONDS)."),
    )
    refresh_token_idle_lifetime = models.PositiveIntegerField(
        _("refresh token idle lifetime (seconds)"),
        null=True,
        blank=True,
        help_text=_(
            "A refresh token unused this long is refused; each refresh starts the window again. "
            "Blank: the site's (REFRESH_TOKEN_EXPIRE_SECONDS); never longer than the site's."
        ),
    )
    session_max_lifetime = models.PositiveIntegerField(
        _("session cap (seconds)"),
        null=True,
        blank=True,
        help_text=_(
            "How long a connection lasts from the user's authorization, refreshes included; then the user "
            'is asked to consent again. Blank: the site\'s (MCP_OAUTH["SESSION_MAX_SECONDS"]).'
        ),
    )

    # RFC 7662 §4: who may introspect what (mcp_oauth.authorization_server.client_auth.introspection_policy).
    resource_server_for = models.ManyToManyField(
        ProtectedResource,
        blank=True,
        related_name="resource_server_clients",
        verbose_name=_("resource server for"),
        help_text=_(
            "Mark this client as the resource server of these resources: it may introspect (RFC 7662) "
            "the tokens whose audience is one of them. Other clients learn nothing by introspection."
        ),
    )

    class Meta:
        verbose_name = _("client profile")
        verbose_name_plural = _("client profiles")

    def __str__(self) -> str:
        return f"profile of {self.application}"


def new_session_id() -> str:
    """A 256-bit random, visible-ASCII session id (MCP transport "Session Management")."""
    return secrets.token_urlsafe(32)


def _idle_cutoff() -> datetime:
    return timezone.now() - timedelta(seconds=mcp_oauth_settings.SESSION_IDLE_TIMEOUT_SECONDS)


class McpSessionQuerySet(models.QuerySet):
    def live(self) -> McpSessionQuerySet:
        """Sessions not ended and not idle longer than ``MCP_OAUTH["SESSION_IDLE_TIMEOUT_SECONDS"]``."""
        return self.filter(ended_at__isnull=True, last_seen_at__gte=_idle_cutoff())


class McpSession(models.Model):
    """A Streamable HTTP session (``Mcp-Session-Id``), kept in the database.

    Bound to the user and client of the token that initialised it: any other
    principal presenting the id is answered 404, as for an unknown id.
    """

    id = models.CharField(primary_key=True, max_length=64, default=new_session_id, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.CASCADE, related_name="+")
    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL, null=True, on_delete=models.CASCADE, related_name="+"
    )
    resource = models.ForeignKey(ProtectedResource, on_delete=models.CASCADE, related_name="sessions")
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("The organization the session's token acts for."),
    )
    protocol_version = models.CharField(max_length=20)
    client_capabilities = models.JSONField(default=dict, blank=True)
    client_info = models.JSONField(default=dict, blank=True)
    # Minimum level of notifications/message set by logging/setLevel (MCP 2025-11-25
    # "Logging"); blank: the client set none, every level is sent.
    log_level = models.CharField(max_length=16, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(default=timezone.now, db_index=True)
    ended_at = models.DateTimeField(null=True, blank=True)

    objects = McpSessionQuerySet.as_manager()

    class Meta:
        verbose_name = _("MCP session")
        verbose_name_plural = _("MCP sessions")

    def __str__(self) -> str:
        return f"session {self.id[:8]}… of {self.user}"

    @property
    def is_live(self) -> bool:
        """Whether this row, as loaded, passes :meth:`McpSessionQuerySet.live` (no query)."""
        return self.ended_at is None and self.last_seen_at >= _idle_cutoff()


class McpSessionEvent(models.Model):
    """A server-to-client message waiting in a session's outbox.

    The session's GET stream sends events in ``id`` order with the SSE event id
    ``<id>``, so a client that reconnects with ``Last-Event-ID``
    receives what it missed (MCP transport "Resumability and Redelivery").
    """

    session = models.ForeignKey(McpSession, on_delete=models.CASCADE, related_name="events")
    message = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["id"]
        verbose_name = _("MCP session event")
        verbose_name_plural = _("MCP session events")


class RedeemedAuthorizationCode(models.Model):
    """An authorization code that was exchanged, kept to detect its replay (OAuth 2.1 §4.1.3, RFC 9700 §4.2.4).

    Only the code's SHA-256 is stored. When the code is presented again with the
    right PKCE verifier, the tokens it produced are revoked (``access_token`` and
    the refresh-token family ``token_family``).
    """

    code_checksum = models.CharField(max_length=64, unique=True)
    application = models.ForeignKey(oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="+")
    code_challenge = models.CharField(max_length=128, blank=True)
    access_token = models.ForeignKey(
        oauth2_settings.ACCESS_TOKEN_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    token_family = models.UUIDField(null=True, blank=True)
    redeemed_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        verbose_name = _("redeemed authorization code")
        verbose_name_plural = _("redeemed authorization codes")
