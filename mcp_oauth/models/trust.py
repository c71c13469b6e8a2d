"""Trust rules: which clients the authorization server deals with, by host or by client.

The rules are evaluated by :mod:`mcp_oauth.authorization_server.client_registry.trust` (read its docstring for the order);
the site-wide mode for clients no rule speaks about is the ``MCP_OAUTH["TRUST_MODE"]``
setting, not a row here, so that it is reviewed and deployed like the rest of the
configuration.
"""

from __future__ import annotations

import ipaddress
import re

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOSTNAME_RE = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$")


def normalize_host(host: str | None) -> str:
    """A host as rules compare it: lower case, IDNA (punycode), no IPv6 brackets, no trailing dot.

    Returns ``""`` for an empty or unencodable host.
    """
    if not host:
        return ""
    host = host.strip().strip("[]").rstrip(".").lower()
    if not host:
        return ""
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if not host.isascii():
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError:
            return ""
    return host


def normalize_pattern(target: str, pattern: str) -> str:
    """The canonical form of a rule pattern; see :class:`TrustRule`.

    :raises ValidationError: a pattern that is neither ``*``, ``*.suffix``, an exact host
        (or IP literal) for host targets, nor a whitespace-free client_id for the client target.
    """
    pattern = (pattern or "").strip()
    if target == TrustRule.Target.CLIENT:
        if not pattern or any(ch.isspace() for ch in pattern) or "\x00" in pattern:
            raise ValidationError(_("A client rule names one client_id exactly (no spaces)."))
        return pattern
    if pattern == "*":
        return pattern
    wildcard = pattern.startswith("*.")
    host = normalize_host(pattern[2:] if wildcard else pattern)
    try:
        ipaddress.ip_address(host)
        is_ip = True
    except ValueError:
        is_ip = False
    if is_ip and not wildcard:
        return host
    if not host or is_ip or "*" in host or not _HOSTNAME_RE.match(host):
        raise ValidationError(
            _("Use an exact host (client.example.com, 127.0.0.1), *.example.com for a domain and its subdomains, or *.")
        )
    return f"*.{host}" if wildcard else host


class TrustRule(models.Model):
    """One allow / deny / require-review rule.

    * ``target`` says what the pattern is matched against:

      - ``client_id_host``: the host of a Client ID Metadata Document ``client_id`` URL
        (CIMD clients only);
      - ``redirect_host``: the host of each of the client's redirect URIs (any client);
      - ``client``: one client, by its exact ``client_id``.

    * ``pattern``: an exact host (``client.example.com``, ``127.0.0.1``), ``*.example.com``
      (``example.com`` and every subdomain: one owner controls them all) or ``*`` (any host);
      for the ``client`` target an exact client_id. Stored lower-case, IDNA-encoded.
    * ``registration_source``: blank for every client, or only clients registered that way
      (``cimd``, ``dcr``, ``manual`` — DOT's ``Application.registration_source``).
    * ``action``: ``allow``, ``deny`` or ``review`` (the client may register but nobody can
      authorize it until an administrator allows it).

    At most one rule per (target, pattern, registration source) site-wide, and one per
    (target, pattern, registration source, organization) in each organization, so rules never
    contradict each other on the same key. An organization's rules apply on top of the site-wide
    ones, to that organization's requests only
    (:mod:`mcp_oauth.authorization_server.organizations.policy`): they may refuse more, never allow
    what the site denies or holds for review.
    """

    class Target(models.TextChoices):
        CLIENT_ID_HOST = "client_id_host", _("CIMD client_id host")
        REDIRECT_HOST = "redirect_host", _("redirect URI host")
        CLIENT = "client", _("one client (exact client_id)")

    class Action(models.TextChoices):
        ALLOW = "allow", _("allow")
        DENY = "deny", _("deny")
        REVIEW = "review", _("require review")

    class Source(models.TextChoices):
        ANY = "", _("any registration")
        CIMD = "cimd", _("Client ID Metadata Document")
        DCR = "dcr", _("dynamic registration")
        MANUAL = "manual", _("registered in the admin")

    target = models.CharField(_("applies to"), max_length=20, choices=Target.choices, default=Target.CLIENT_ID_HOST)
    pattern = models.CharField(
        _("pattern"),
        max_length=255,
        help_text=_("Exact host, *.example.com (the domain and its subdomains), * (any host), or a client_id."),
    )
    registration_source = models.CharField(
        _("registration source"), max_length=10, choices=Source.choices, default=Source.ANY, blank=True
    )
    action = models.CharField(_("action"), max_length=10, choices=Action.choices)
    enabled = models.BooleanField(_("enabled"), default=True)
    organization = models.ForeignKey(
        "mcp_oauth.Organization",
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="+",
        verbose_name=_("organization"),
        help_text=_("Blank: a site-wide rule. Set: the rule applies to that organization's members only."),
    )
    note = models.CharField(_("note"), max_length=500, blank=True)
    created_at = models.DateTimeField(_("created"), default=timezone.now, editable=False)
    updated_at = models.DateTimeField(_("updated"), auto_now=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+", editable=False
    )

    class Meta:
        ordering = ["target", "pattern"]
        verbose_name = _("trust rule")
        verbose_name_plural = _("trust rules")
        constraints = [
            models.UniqueConstraint(
                fields=["target", "pattern", "registration_source"],
                condition=models.Q(organization__isnull=True),
                name="mcp_oauth_trustrule_unique_key",
            ),
            models.UniqueConstraint(
                fields=["target", "pattern", "registration_source", "organization"],
                condition=models.Q(organization__isnull=False),
                name="mcp_oauth_trustrule_unique_key_per_organization",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.get_action_display()} {self.get_target_display()} {self.pattern}"

    def clean(self) -> None:
        try:
            self.pattern = normalize_pattern(self.target, self.pattern)
        except ValidationError as exc:
            raise ValidationError({"pattern": exc.messages}) from None

    def save(self, *args, **kwargs) -> None:
        self.pattern = normalize_pattern(self.target, self.pattern)
        super().save(*args, **kwargs)

    # Matching -----------------------------------------------------------------------

    def specificity(self) -> tuple[int, int]:
        """How narrow the rule is: a client rule, then exact hosts, then longer suffixes, then ``*``."""
        if self.target == self.Target.CLIENT:
            return (3, 0)
        if self.pattern == "*":
            return (0, 0)
        if self.pattern.startswith("*."):
            return (1, len(self.pattern))
        return (2, len(self.pattern))

    def matches_host(self, host: str) -> bool:
        """Whether the (already :func:`normalize_host`-ed) ``host`` matches this host pattern."""
        if not host:
            return False
        if self.pattern == "*":
            return True
        if self.pattern.startswith("*."):
            suffix = self.pattern[2:]
            return host == suffix or host.endswith("." + suffix)
        return host == self.pattern
