"""The trust policy: which OAuth clients this authorization server deals with.

Inputs are the :class:`~mcp_oauth.models.TrustRule` rows (managed in the admin) and the
site-wide ``MCP_OAUTH["TRUST_MODE"]`` setting. :func:`evaluate` turns what is known about a
client into a :class:`Verdict`:

``trusted``
    a rule allows it, or an administrator registered it (``registration_source`` ``manual``);
``unknown``
    no rule speaks about it and the mode is ``open`` ("any https client"): it may be
    authorized, and the consent page says it is not verified;
``review``
    a rule, or the mode ``review``, holds it: it may register, nobody can authorize it until
    an administrator allows it (admin action "Trust selected clients");
``denied``
    a rule denies it, or the mode is ``allowlist`` and no rule allows it.

Evaluation order (first match wins):

1. any enabled **deny** rule that matches (the client, its CIMD client_id host, or any of its
   redirect URI hosts) → ``denied``. A deny always wins, whatever else matches;
2. a **client** rule (exact client_id) → its action (``allow`` → ``trusted``, ``review``);
3. a **review** rule matching the client_id host or any redirect host → ``review``;
4. an **allow** rule for the CIMD client_id host → ``trusted``; for a client that is not a
   CIMD client, allow rules covering *every* redirect host → ``trusted`` (a CIMD client's
   identity is its client_id host: redirect-host allow rules do not vouch for it);
5. nothing matched: ``manual`` clients → ``trusted``; others → the mode (``open`` →
   ``unknown``, ``review`` → ``review``, ``allowlist`` → ``denied``).

Among the rules of one kind that match the same host the most specific counts (exact host
over ``*.suffix``, longer suffix over shorter, over ``*``); a rule applies only to clients of
its ``registration_source`` when it names one.

Where it is enforced:

* **registration** — :class:`TrustPolicyDCRPermission` (RFC 7591 ``POST /oauth/register``, a
  ``denied`` registration gets 403 ``access_denied``) and :class:`TrustPolicyCIMDPermission`
  (before a Client ID Metadata Document is fetched, so a denied host is never contacted),
  installed through DOT's ``DCR_REGISTRATION_PERMISSION_CLASSES`` /
  ``CIMD_REGISTRATION_PERMISSION_CLASSES``;
* **every authorization** — the authorization view (GET and the consent POST) answers a client
  that is not allowed with an error page (``access_denied``, HTTP 403), never a redirect
  (OAuth 2.1 §4.1.2.1, RFC 9700 §4.11.2);
* **every token request** — the request validator answers ``invalid_client`` (HTTP 401,
  RFC 6749 §5.2) for a grant to a client that is not allowed (code exchange, refresh,
  client credentials), so blocking a client also stops its refresh tokens.

Every refusal is written to the audit log (``trust.denied``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.checks import CheckMessage, Error
from django.core.checks import Warning as CheckWarning
from oauthlib.oauth2.rfc6749 import errors as oauth_errors

from mcp_oauth.audit import record
from mcp_oauth.models import AuditEvent
from mcp_oauth.models.trust import TrustRule, normalize_host
from mcp_oauth.settings import mcp_oauth_settings

log = logging.getLogger(__name__)

#: Verdicts.
TRUSTED = "trusted"
UNKNOWN = "unknown"
REVIEW = "review"
DENIED = "denied"

#: Values of ``MCP_OAUTH["TRUST_MODE"]``.
MODE_OPEN = "open"
MODE_ALLOWLIST = "allowlist"
MODE_REVIEW = "review"
MODES = (MODE_OPEN, MODE_ALLOWLIST, MODE_REVIEW)

CIMD = "cimd"
DCR = "dcr"
MANUAL = "manual"

#: What the user and the client are told (ASCII, as RFC 6749 §5.2 wants error_description).
USER_MESSAGES = {
    DENIED: "This application is not allowed to connect to this site.",
    REVIEW: "This application is waiting for approval by this site's administrators. Try again later.",
}


@dataclass(frozen=True)
class Verdict:
    """The outcome of :func:`evaluate`.

    :ivar decision: ``trusted``, ``unknown``, ``review`` or ``denied``.
    :ivar reason: a sentence for administrators and the audit log (no secrets; names the rule).
    :ivar rule_id: the primary key of the deciding :class:`TrustRule`, or None.
    :ivar hosts: the hosts considered: ``{"client_id_host": str | None, "redirect_hosts": [str]}``.
    """

    decision: str
    reason: str
    rule_id: int | None = None
    hosts: dict[str, Any] = field(default_factory=dict)

    @property
    def allowed(self) -> bool:
        """Whether the client may be authorized and obtain tokens (``trusted`` or ``unknown``)."""
        return self.decision in (TRUSTED, UNKNOWN)

    @property
    def user_message(self) -> str:
        """What to tell the user or the client when the client is not allowed ("" when it is)."""
        return USER_MESSAGES.get(self.decision, "")

    def as_detail(self) -> dict[str, Any]:
        """A JSON-able summary for the audit log."""
        return {"verdict": self.decision, "reason": self.reason, "rule": self.rule_id, **self.hosts}


def host_of(uri: str) -> str:
    """The normalized host of ``uri`` (see :func:`~mcp_oauth.models.trust.normalize_host`), ``""`` if none."""
    try:
        return normalize_host(urlsplit(str(uri)).hostname)
    except ValueError:
        return ""


def is_cimd_client_id(client_id: str) -> bool:
    """Whether ``client_id`` is a Client ID Metadata Document URL (an https URL)."""
    return bool(client_id) and str(client_id)[:8].lower() == "https://"


_snapshot: ContextVar[list[TrustRule] | None] = ContextVar("mcp_oauth_trust_rules", default=None)


def load_rules() -> list[TrustRule]:
    """The enabled site-wide rules (an organization's own rules are applied on top by
    :mod:`mcp_oauth.authorization_server.organizations.policy`): from the database (one query, so a changed rule applies at once),
    or the snapshot taken by an enclosing :func:`rules_snapshot`."""
    snapshot = _snapshot.get()
    if snapshot is not None:
        return snapshot
    return list(TrustRule.objects.filter(enabled=True, organization__isnull=True))


@contextmanager
def rules_snapshot(rules: Sequence[TrustRule] | None = None):
    """Within this block :func:`load_rules` answers from one query (e.g. an admin list of many clients),
    or from ``rules`` when given (the enabled rules, e.g. a cache of them that is known current)."""
    loaded = list(TrustRule.objects.filter(enabled=True, organization__isnull=True)) if rules is None else list(rules)
    token = _snapshot.set(loaded)
    try:
        yield
    finally:
        _snapshot.reset(token)


def current_mode() -> str:
    """``MCP_OAUTH["TRUST_MODE"]``; an unrecognised value is treated as ``allowlist`` (fail closed)."""
    mode = mcp_oauth_settings.TRUST_MODE
    if mode not in MODES:
        log.error("MCP_OAUTH['TRUST_MODE'] = %r is not one of %s; treating it as 'allowlist'.", mode, MODES)
        return MODE_ALLOWLIST
    return mode


def _best(rules: Iterable[TrustRule]) -> TrustRule | None:
    """The most specific rule; on a tie ``review`` beats ``allow`` (the cautious one)."""
    return max(rules, key=lambda r: (r.specificity(), r.action == TrustRule.Action.REVIEW), default=None)


def evaluate(
    *,
    client_id: str = "",
    redirect_uris: Iterable[str] = (),
    registration_source: str | None,
    rules: Sequence[TrustRule] | None = None,
    mode: str | None = None,
) -> Verdict:
    """Decide whether a client is trusted, unknown, held for review or denied (see the module docstring).

    :param client_id: the client's ``client_id`` (for a CIMD client, its metadata document URL);
        may be empty for a registration that has none yet.
    :param redirect_uris: its redirect URIs (absolute URIs; unparseable ones have no host).
    :param registration_source: ``cimd``, ``dcr`` or ``manual`` (DOT's ``Application.RegistrationSource``);
        None or empty when unknown (only rules for every source apply).
    :param rules: the rules to apply (default: :func:`load_rules`).
    :param mode: the site mode (default: :func:`current_mode`).
    :returns: a :class:`Verdict`. Never raises for any client input.
    """
    rules = load_rules() if rules is None else rules
    mode = current_mode() if mode is None else mode
    client_id = str(client_id or "")
    source = registration_source or ""
    cid_host = host_of(client_id) if source == CIMD and is_cimd_client_id(client_id) else ""
    redirect_hosts = list(dict.fromkeys(host_of(uri) for uri in redirect_uris))
    hosts = {"client_id_host": cid_host or None, "redirect_hosts": [h for h in redirect_hosts if h]}
    applicable = [r for r in rules if r.enabled and r.registration_source in ("", source)]

    def on_client(rule: TrustRule) -> bool:
        return rule.target == TrustRule.Target.CLIENT and bool(client_id) and rule.pattern == client_id

    def on_cid(rule: TrustRule) -> bool:
        return rule.target == TrustRule.Target.CLIENT_ID_HOST and rule.matches_host(cid_host)

    def on_redirect(rule: TrustRule, host: str) -> bool:
        return rule.target == TrustRule.Target.REDIRECT_HOST and rule.matches_host(host)

    def verdict(decision: str, reason: str, rule: TrustRule | None = None) -> Verdict:
        return Verdict(decision, reason, rule.pk if rule is not None else None, hosts)

    # 1. deny wins
    denies = [
        r
        for r in applicable
        if r.action == TrustRule.Action.DENY
        and (on_client(r) or on_cid(r) or any(on_redirect(r, h) for h in redirect_hosts))
    ]
    if denies:
        rule = _best(denies)
        assert rule is not None  # denies is not empty
        return verdict(DENIED, f"denied by rule #{rule.pk} ({rule.get_target_display()} {rule.pattern})", rule)
    others = [r for r in applicable if r.action != TrustRule.Action.DENY]
    # 2. a rule about this very client
    client_rule = _best(r for r in others if on_client(r))
    if client_rule is not None:
        decision = TRUSTED if client_rule.action == TrustRule.Action.ALLOW else REVIEW
        return verdict(decision, f"{client_rule.get_action_display()} by client rule #{client_rule.pk}", client_rule)
    # 3./4. host rules, the most specific per host
    cid_rule = _best(r for r in others if on_cid(r)) if cid_host else None
    redirect_rules = {h: _best(r for r in others if on_redirect(r, h)) for h in redirect_hosts}
    holding = [r for r in [cid_rule, *redirect_rules.values()] if r is not None and r.action == TrustRule.Action.REVIEW]
    if holding:
        rule = holding[0]
        return verdict(REVIEW, f"held for review by rule #{rule.pk} ({rule.get_target_display()} {rule.pattern})", rule)
    if cid_rule is not None:  # an allow rule
        return verdict(TRUSTED, f"client_id host allowed by rule #{cid_rule.pk} ({cid_rule.pattern})", cid_rule)
    if source != CIMD and redirect_hosts and all(redirect_rules.values()):
        rule = next(iter(redirect_rules.values()))
        assert rule is not None  # all() above
        return verdict(TRUSTED, f"every redirect host allowed (rule #{rule.pk} and others)", rule)
    # 5. nothing matched
    if source == MANUAL:
        return verdict(TRUSTED, "registered by this site's administrators")
    if mode == MODE_OPEN:
        return verdict(UNKNOWN, "no trust rule matches; TRUST_MODE is open")
    if mode == MODE_REVIEW:
        return verdict(REVIEW, "no trust rule matches; TRUST_MODE holds unknown clients for review")
    return verdict(DENIED, "no trust rule allows it; TRUST_MODE is allowlist")


def evaluate_application(application, *, rules: Sequence[TrustRule] | None = None) -> Verdict:
    """:func:`evaluate` for a stored DOT ``Application`` (its client_id, redirect URIs and registration source)."""
    return evaluate(
        client_id=application.client_id,
        redirect_uris=(application.redirect_uris or "").split(),
        registration_source=application.registration_source,
        rules=rules,
    )


def record_denial(verdict: Verdict, *, request=None, user=None, client_id: str = "", stage: str) -> None:
    """Write a ``trust.denied`` audit event (``stage``: ``registration``, ``cimd``, ``authorization``, ``token``)."""

    record(
        AuditEvent.Kind.TRUST_DENIED,
        request=request,
        user=user,
        client_id=client_id,
        detail={"stage": stage, **verdict.as_detail()},
    )


# --- errors ---------------------------------------------------------------------------


class UntrustedClientAuthorizationError(oauth_errors.FatalClientError):
    """The client may not be authorized (``access_denied``, HTTP 403).

    A :class:`~oauthlib.oauth2.rfc6749.errors.FatalClientError`, so the authorization view
    shows it on its own error page and never redirects to the client (OAuth 2.1 §4.1.2.1).
    """

    error = "access_denied"
    status_code = 403


class UntrustedClientTokenError(oauth_errors.InvalidClientError):
    """The client may not obtain tokens (``invalid_client``, HTTP 401, RFC 6749 §5.2)."""


# --- DOT permission classes -----------------------------------------------------------


class TrustPolicyDCRPermission:
    """DOT ``DCR_REGISTRATION_PERMISSION_CLASSES`` entry: the trust policy for RFC 7591 registrations.

    Evaluates the registration's redirect URIs as a ``dcr`` client. A ``denied`` verdict refuses
    it: :attr:`denial` then holds ``(error, description, HTTP status)`` =
    ``("access_denied", …, 403)`` for the registration view, and a ``trust.denied`` audit event
    is written. ``review`` and ``unknown`` registrations are accepted (a held client cannot be
    authorized until an administrator allows it). A body that is not a JSON object passes
    (the view answers ``invalid_client_metadata``).
    """

    denial: tuple[str, str, int] | None = None

    def has_permission(self, request) -> bool:
        try:
            data = json.loads(request.body or b"")
        except (ValueError, UnicodeDecodeError):
            return True
        if not isinstance(data, dict):
            return True
        uris = data.get("redirect_uris")
        uris = [u for u in uris if isinstance(u, str)] if isinstance(uris, list) else []
        verdict = evaluate(redirect_uris=uris, registration_source=DCR)
        if verdict.decision != DENIED:
            return True
        record_denial(verdict, request=request, stage="registration")
        self.denial = (
            "access_denied",
            "This server's client policy does not accept this registration; ask the site's administrators to allow it.",
            403,
        )
        return False


class TrustPolicyCIMDPermission:
    """DOT ``CIMD_REGISTRATION_PERMISSION_CLASSES`` entry: may this client_id URL be fetched and registered?

    ``has_permission(request, client_id)`` (``request`` is the oauthlib request) evaluates the
    client_id as a ``cimd`` client before any fetch (draft-ietf-oauth-client-id-metadata-document
    §6, SSRF): ``denied`` refuses (DOT then treats the client as unknown) and writes a
    ``trust.denied`` audit event; anything else lets DOT fetch it. The redirect URIs are not
    known yet: they are checked at every authorization.
    """

    def has_permission(self, request, client_id) -> bool:
        verdict = evaluate(client_id=client_id, registration_source=CIMD)
        if verdict.decision != DENIED:
            return True
        if not getattr(request, "_mcp_trust_recorded", False):
            record_denial(verdict, request=request, client_id=client_id, stage="cimd")
            if request is not None:
                request._mcp_trust_recorded = True
        return False


# --- system checks --------------------------------------------------------------------


def check_settings() -> list:
    """System-check messages about the trust settings (run by :mod:`mcp_oauth.checks`).

    * ``mcp_oauth.E030``: ``TRUST_MODE`` is not ``open``, ``allowlist`` or ``review`` (requests
      then treat it as ``allowlist``);
    * ``mcp_oauth.W031``: ``OAUTH2_PROVIDER`` replaces the DCR or CIMD permission classes without
      the trust policy's, so it no longer applies at registration (it still does at authorization).
    """
    messages: list[CheckMessage] = []
    if mcp_oauth_settings.TRUST_MODE not in MODES:
        messages.append(
            Error(
                f'MCP_OAUTH["TRUST_MODE"] = {mcp_oauth_settings.TRUST_MODE!r} is not one of {", ".join(MODES)}.',
                hint="Requests treat it as allowlist until it is fixed.",
                id="mcp_oauth.E030",
            )
        )
    site = getattr(settings, "OAUTH2_PROVIDER", {}) or {}
    for key, name in (
        ("DCR_REGISTRATION_PERMISSION_CLASSES", "TrustPolicyDCRPermission"),
        ("CIMD_REGISTRATION_PERMISSION_CLASSES", "TrustPolicyCIMDPermission"),
    ):
        if key in site and not any(str(getattr(c, "__name__", c)).endswith(name) for c in site[key] or ()):
            messages.append(
                CheckWarning(
                    f'OAUTH2_PROVIDER["{key}"] leaves out mcp_oauth.authorization_server.client_registry.trust.{name}: trust rules no longer apply at registration.',
                    hint=f'Add "mcp_oauth.authorization_server.client_registry.trust.{name}" to it (rules still apply at every authorization).',
                    id="mcp_oauth.W031",
                )
            )
    return messages
