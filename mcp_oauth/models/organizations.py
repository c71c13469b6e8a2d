"""Organizations: the customers one deployment serves, their members and the clients they approved.

An :class:`Organization` holds a customer's policy; a row left blank or null inherits the
site-wide policy. A site with a tenant model of its own ("Team", "Workspace", django-organizations)
keeps one :class:`Organization` per tenant, keyed by ``external_id``, and maps its members through
the adapter (:meth:`mcp_oauth.adapter.DefaultMCPAdapter.organization_memberships`): the default
adapter reads :class:`OrganizationMembership`.

Which organization a request acts for is decided where the token or the consent is: a
per-organization MCP endpoint is a :class:`~mcp_oauth.models.ProtectedResource` whose
``organization`` is set (tokens are bound to it by audience, RFC 8707); on a shared endpoint the
user chooses one on the consent page and the grant is bound to it
(:attr:`mcp_oauth.models.Consent.organization`).
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from oauth2_provider.settings import oauth2_settings


class OrganizationQuerySet(models.QuerySet):
    def active(self) -> OrganizationQuerySet:
        return self.filter(is_active=True)


class Organization(models.Model):
    """A customer organization (a company, workspace or team) and its policy.

    Policy fields left null (or blank, or empty) inherit the site-wide policy:

    * ``client_approval_required``: members may use only clients an organization admin approved
      (:class:`OrganizationClient`); a new client is recorded as pending and the member sees a page
      saying an admin must approve it;
    * ``allow_dynamic_registration`` / ``allow_client_id_metadata_documents``: whether clients
      registered by RFC 7591 or by a Client ID Metadata Document may act for the organization;
    * ``enabled_tools``: the names of the tools its members may list and call (empty: every tool);
    * ``allowed_scopes``: the scopes its tokens may carry (space-separated; blank: the site's);
    * ``access_token_lifetime`` / ``refresh_token_lifetime``: seconds.
    """

    slug = models.SlugField(
        _("slug"),
        max_length=100,
        unique=True,
        help_text=_("Short name used in URLs, e.g. the per-organization MCP endpoint /mcp/o/<slug>."),
    )
    name = models.CharField(_("name"), max_length=200)
    external_id = models.CharField(
        _("external id"),
        max_length=255,
        blank=True,
        help_text=_("The key of the site's own tenant (team, workspace, account) this organization stands for."),
    )
    is_active = models.BooleanField(
        _("active"), default=True, help_text=_("An inactive organization's tokens and endpoints are refused.")
    )
    client_approval_required = models.BooleanField(
        _("clients need an admin's approval"),
        default=False,
        help_text=_("Members may use only clients an admin of this organization approved."),
    )
    allow_dynamic_registration = models.BooleanField(
        _("allow dynamically registered clients"),
        null=True,
        blank=True,
        help_text=_("Unknown: as the site allows (RFC 7591 clients)."),
    )
    allow_client_id_metadata_documents = models.BooleanField(
        _("allow Client ID Metadata Document clients"),
        null=True,
        blank=True,
        help_text=_("Unknown: as the site allows (CIMD clients)."),
    )
    enabled_tools = models.JSONField(
        _("enabled tools"),
        default=list,
        blank=True,
        help_text=_("Names of the tools members may list and call; empty: every tool."),
    )
    allowed_scopes = models.CharField(
        _("allowed scopes"),
        max_length=500,
        blank=True,
        help_text=_("Space-separated; blank: every scope the site offers."),
    )
    access_token_lifetime = models.PositiveIntegerField(
        _("access token lifetime (seconds)"), null=True, blank=True, help_text=_("Blank: the site's.")
    )
    refresh_token_lifetime = models.PositiveIntegerField(
        _("refresh token lifetime (seconds)"), null=True, blank=True, help_text=_("Blank: the site's.")
    )
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)

    objects = OrganizationQuerySet.as_manager()

    class Meta:
        verbose_name = _("organization")
        verbose_name_plural = _("organizations")
        ordering = ["name", "slug"]
        constraints = [
            models.UniqueConstraint(
                fields=["external_id"],
                condition=~models.Q(external_id=""),
                name="mcp_oauth_organization_unique_external_id",
            )
        ]

    def __str__(self) -> str:
        return self.name or self.slug

    @property
    def allowed_scope_list(self) -> list[str]:
        return self.allowed_scopes.split()


class OrganizationMembership(models.Model):
    """A user's place in an organization: ``member`` or ``admin`` (manages its policy, members'
    grants, approved clients, Tasks and audit in the Django admin, and nothing of another)."""

    class Role(models.TextChoices):
        MEMBER = "member", _("member")
        ADMIN = "admin", _("admin")

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_organization_memberships"
    )
    role = models.CharField(_("role"), max_length=10, choices=Role.choices, default=Role.MEMBER)
    created_at = models.DateTimeField(_("joined"), default=timezone.now, editable=False)

    class Meta:
        verbose_name = _("organization membership")
        verbose_name_plural = _("organization memberships")
        ordering = ["organization", "user"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "user"], name="mcp_oauth_one_membership_per_user")
        ]

    def __str__(self) -> str:
        return f"{self.user} in {self.organization} ({self.role})"


class OrganizationClient(models.Model):
    """An organization's decision on one client: ``pending`` (a member asked; an admin must
    decide), ``approved`` or ``denied``. Read when the organization requires approval."""

    class Status(models.TextChoices):
        PENDING = "pending", _("pending approval")
        APPROVED = "approved", _("approved")
        DENIED = "denied", _("denied")

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="clients")
    application = models.ForeignKey(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="mcp_organization_clients"
    )
    status = models.CharField(_("status"), max_length=10, choices=Status.choices, default=Status.PENDING)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    requested_at = models.DateTimeField(_("requested"), default=timezone.now, editable=False)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )
    decided_at = models.DateTimeField(_("decided"), null=True, blank=True, editable=False)

    class Meta:
        verbose_name = _("organization client")
        verbose_name_plural = _("organization clients")
        ordering = ["organization", "-requested_at"]
        constraints = [
            models.UniqueConstraint(fields=["organization", "application"], name="mcp_oauth_one_decision_per_client")
        ]

    def __str__(self) -> str:
        return f"{self.application} for {self.organization}: {self.status}"


class TokenOrganization(models.Model):
    """The organization an access or refresh token acts for, when it was chosen on a shared
    endpoint's consent page (a per-organization endpoint's tokens act for
    ``ProtectedResource.organization``, by audience).

    Keyed like ``DPoPBinding`` (:mod:`mcp_oauth.dpop.bindings`): ``token_checksum`` is the SHA-256 hex of the
    token value (DOT's ``token_checksum``), and the row is written *before* the token rows, so a
    token bound to an organization never exists unbound; a grant that then fails leaves a row that
    names no token, pruned with the expired ones. A refreshed token inherits its refresh token's row.
    """

    class Kind(models.TextChoices):
        ACCESS_TOKEN = "access_token", _("access token")
        REFRESH_TOKEN = "refresh_token", _("refresh token")

    token_checksum = models.CharField(_("token checksum"), max_length=64, unique=True)
    token_kind = models.CharField(_("token kind"), max_length=16, choices=Kind.choices)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(_("created"), default=timezone.now)
    expires = models.DateTimeField(_("expires"), null=True, blank=True, db_index=True)

    class Meta:
        verbose_name = _("token organization")
        verbose_name_plural = _("token organizations")

    def __str__(self) -> str:
        return f"{self.token_kind} for {self.organization_id}"
