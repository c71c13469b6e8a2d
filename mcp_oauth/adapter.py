"""The policy adapter: the decisions a site may want to make its own, behind one class.

Like django-allauth's ``get_adapter()``: :func:`get_adapter` returns the one instance of the
class named by ``MCP_OAUTH["ADAPTER"]`` (default :class:`DefaultMCPAdapter`, today's
behaviour), resolved once and again only when ``MCP_OAUTH`` changes (the settings object keeps
it: ``mcp_oauth_settings.adapter``). Subclass
:class:`DefaultMCPAdapter` and override what you need::

    # myproject/mcp_adapter.py
    from mcp_oauth.adapter import DefaultMCPAdapter

    class CompanyAdapter(DefaultMCPAdapter):
        def can_skip_consent(self, request, application, scopes, resource):
            # our own desktop app, approved once by the user: no consent page again
            return application.client_id == "https://apps.example.com/desktop.json" or super().can_skip_consent(
                request, application, scopes, resource)

    MCP_OAUTH = {..., "ADAPTER": "myproject.mcp_adapter.CompanyAdapter"}

The decisions:

* :meth:`~DefaultMCPAdapter.authenticate_request` — token verification for a protected
  resource (the MCP endpoint, ``@require_bearer`` views, the DRF authentication class);
* :meth:`~DefaultMCPAdapter.trust_verdict` — the trust policy's verdict on a client;
* :meth:`~DefaultMCPAdapter.describe_client` — what the consent page says about a client;
* :meth:`~DefaultMCPAdapter.can_skip_consent` — whether an authorization request is approved
  without the consent page;
* :meth:`~DefaultMCPAdapter.user_for_token` — the user an access token speaks for;
* :meth:`~DefaultMCPAdapter.enterprise_user` — the user an enterprise IdP's ID-JAG speaks for;
* :meth:`~DefaultMCPAdapter.may_introspect` — whether a client may learn about a token by introspection;
* :meth:`~DefaultMCPAdapter.redact_tool_arguments` — what the tool-call audit trail keeps of a call's
  arguments (only with ``TOOL_CALL_AUDIT_ARGUMENTS``);
* :meth:`~DefaultMCPAdapter.organization_memberships` — which organizations a user belongs to, and
  with which role (where a site maps its own tenant model);
* :meth:`~DefaultMCPAdapter.organization_client_decision` — whether a client may act for an
  organization's members (approval, the organization's trust rules, its DCR/CIMD settings);
* :meth:`~DefaultMCPAdapter.token_exchange_decision` — whether a client may exchange an access token
  for another (RFC 8693: down-scoping, or delegation to another protected resource).
* :meth:`~DefaultMCPAdapter.access_token_lifetime` — the access-token lifetime of one issuance
  (after the client, resource, organization and site settings).
* :meth:`~DefaultMCPAdapter.skill_visible` — whether a request may see a skill (Skills extension).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from django.core.checks import Error
from django.http import HttpRequest

from mcp_oauth.authorization_server.client_auth import introspection_policy
from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.authorization_server.enterprise_identity.users import user_for_subject
from mcp_oauth.authorization_server.organizations import policy as organization_policy
from mcp_oauth.authorization_server.token_exchange.decision import TokenExchangeDecision, refuse
from mcp_oauth.models import OrganizationMembership
from mcp_oauth.resource_server.authentication import authenticate_bearer
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.loopback import is_loopback_host
from mcp_oauth.shared.text import without_invisible_format_characters


class DefaultMCPAdapter:
    """Today's behaviour; every method may be overridden (keep the signatures and return shapes)."""

    def authenticate_request(self, request: HttpRequest, resource, required_scopes: Iterable[str] = ()):
        """Verify the bearer token of ``request`` for ``resource`` (OAuth 2.1 §5.2, RFC 6750, RFC 8707).

        :returns: a :class:`~mcp_oauth.resource_server.authentication.BearerPrincipal`.
        :raises BearerChallenge: 401 / 403, as :func:`~mcp_oauth.resource_server.authentication.authenticate_bearer`.
        """
        return authenticate_bearer(request, resource, required_scopes)

    def user_for_token(self, access_token) -> Any:
        """The user ``access_token`` (a DOT ``AccessToken``) speaks for; None for a client-credentials token.

        A returned user that is not ``is_active`` makes the token ``invalid_token``. For a JWT access
        token (RFC 9068) ``access_token`` is a ``mcp_oauth.resource_server.jwt_tokens.JWTAccessToken``
        (``claims``, ``user_id`` from ``sub``, ``user`` a lazy object whose ``pk`` needs no query); its
        user's ``is_active`` is not read (a deactivation puts its tokens in the deny-list).
        """
        return access_token.user

    def enterprise_user(self, provider, claims: dict[str, Any], request=None) -> Any:
        """The local user a verified ID-JAG speaks for, or None to refuse it (``invalid_grant``).

        :param provider: the :class:`~mcp_oauth.models.EnterpriseIdentityProvider` that signed it.
        :param claims: its verified claims (``iss``, ``sub``, ``client_id``, ``resource``, ``email``, ...).

        Default: :func:`mcp_oauth.authorization_server.enterprise_identity.users.user_for_subject` (the link
        ``iss`` + ``sub``, then the provider's e-mail policy).
        """
        return user_for_subject(provider, claims, request)

    def trust_verdict(
        self,
        application=None,
        *,
        client_id: str = "",
        registration_source: str | None = None,
        redirect_uris: Iterable[str] = (),
    ) -> trust.Verdict:
        """The trust policy's :class:`~mcp_oauth.authorization_server.client_registry.trust.Verdict` on a stored ``application``, or on a client known
        only by its ``client_id`` (a CIMD URL not fetched yet) and ``redirect_uris``."""
        if application is not None:
            return trust.evaluate_application(application)
        return trust.evaluate(
            client_id=client_id, redirect_uris=list(redirect_uris), registration_source=registration_source
        )

    def describe_client(self, application, verdict: trust.Verdict | None = None) -> dict:
        """What the consent page says about a client (MCP "Client ID Metadata Documents" security, CIMD §8.5).

        Returns ``{"name", "client_id_host", "registration_source", "redirect_hosts", "all_loopback",
        "trust"}``; ``trust`` is the verdict's decision (``trusted`` or ``unknown`` on a consent page),
        evaluated with :meth:`trust_verdict` when ``verdict`` is not given.
        """
        if verdict is None:
            verdict = self.trust_verdict(application)
        redirect_uris = application.redirect_uris.split()
        hosts = [urlsplit(uri).hostname or uri for uri in redirect_uris]
        client_id_host = None
        if application.client_id.startswith("https://"):
            client_id_host = urlsplit(application.client_id).hostname
        return {
            # Bidi overrides and zero-width characters dropped (clients registered before they were refused).
            "name": without_invisible_format_characters(application.name or "") or application.client_id,
            "client_id_host": client_id_host,
            "registration_source": application.registration_source,
            "redirect_hosts": list(dict.fromkeys(hosts)),
            "all_loopback": bool(redirect_uris) and all(is_loopback_host(urlsplit(u).hostname) for u in redirect_uris),
            "trust": verdict.decision,
        }

    def can_skip_consent(self, request: HttpRequest, application, scopes: list[str], resource: str | None) -> bool:
        """Whether this authorization request is approved without showing the consent page.

        Default: only for a client an administrator marked ``skip_authorization`` — consent is asked
        every time otherwise, whatever the client asks (``approval_prompt`` is ignored; OAuth 2.1
        §7.3.1: no silent re-approval of public clients whose identity cannot be proven). An
        automatic approval is audited as ``consent.granted`` with ``detail.automatic``.
        """
        return bool(application.skip_authorization)

    def may_introspect(self, client, token) -> bool:
        """Whether the authenticated ``client`` (a DOT ``Application``, ``None`` when unknown) may learn
        about the active ``token`` (a DOT ``AccessToken``) at the introspection endpoint (RFC 7662 §4).
        False: the caller is answered ``{"active": false}`` (§2.2).

        Default: :func:`mcp_oauth.authorization_server.client_auth.introspection_policy.may_introspect` — the
        client is marked as the resource server of one of the token's audiences
        (``ClientProfile.resource_server_for``).
        """
        return introspection_policy.may_introspect(client, token)

    def mcp_rate_limit(self, principal) -> Any:
        """The token bucket of ``principal``'s client on the MCP endpoint
        (:mod:`mcp_oauth.mcp_server.transport.admission`): ``{"rate": <requests per second>,
        "burst": <requests>}``, a ``mcp_oauth.shared.rate_limit.RateLimit``, or None for no
        limit. Called on every MCP request (on the event loop: no database query here), after
        authentication; ``principal.client_id`` names the bucket.

        Default: ``MCP_OAUTH["MCP_RATE_LIMIT"]`` for every client.
        """
        return mcp_oauth_settings.MCP_RATE_LIMIT

    #: Argument names whose values :meth:`redact_tool_arguments` hides: substrings of the key, both
    #: compared in NFKC, case-folded, without separators (``API-Key``, ``apiKey``, ``api_key``,
    #: ``ｐａｓｓｗｏｒｄ`` and ``pasſword`` all match).
    REDACTED_ARGUMENT_NAMES: tuple[str, ...] = (
        "password",
        "passwd",
        "secret",
        "token",
        "apikey",
        "api_key",
        "authorization",
        "credential",
        "private_key",
        "cookie",
    )

    def redact_tool_arguments(self, tool: str, arguments: Any) -> Any:
        """What the tool-call audit trail stores of ``arguments`` (``TOOL_CALL_AUDIT_ARGUMENTS`` on).

        Runs on the trail's writer thread, never on the request path. :param tool: the tool (or
        prompt, resource URI) named by the call. :param arguments: the call's ``arguments`` (JSON
        values, not to be mutated). :returns: JSON-able values to store, or None to store nothing.

        Default: a copy where the value of every object key containing one of
        :attr:`REDACTED_ARGUMENT_NAMES` (at any depth; compared in NFKC, case-folded, without
        separators) is ``"[redacted]"``.
        """
        return _redacted(arguments, self.REDACTED_ARGUMENT_NAMES)

    def organization_memberships(self, user) -> dict[int, str]:
        """The active organizations ``user`` belongs to: ``{Organization.pk: role}``, the role
        ``"member"`` or ``"admin"`` (:class:`~mcp_oauth.models.OrganizationMembership.Role`).

        Default: the user's :class:`~mcp_oauth.models.OrganizationMembership` rows. A site with a
        tenant model of its own overrides this to read it, keeping one
        :class:`~mcp_oauth.models.Organization` per tenant (``external_id``). An anonymous user or
        None belongs to none (``{}``).
        """
        if user is None or not getattr(user, "is_authenticated", False):
            return {}
        rows = OrganizationMembership.objects.filter(user=user, organization__is_active=True)
        return dict(rows.values_list("organization_id", "role"))

    def organization_client_decision(self, request, organization, application) -> organization_policy.ClientDecision:
        """Whether ``application`` (a DOT ``Application``) may act for ``organization``'s members.

        Asked on the consent page (``request`` is the Django request; for a shared endpoint once the
        user chose the organization) and at the token endpoint for every grant that acts for an
        organization (``request`` is oauthlib's request). The site-wide trust policy
        (:meth:`trust_verdict`) has been applied before; this decision can only refuse more.

        :returns: a :class:`~mcp_oauth.authorization_server.organizations.policy.ClientDecision`:
            ``approved`` (consent page, then tokens), ``pending`` (the member is told an admin of
            the organization must approve the client; a pending ``OrganizationClient`` row is
            recorded), ``denied`` or ``refused`` (a page saying so). At the token endpoint anything
            but ``approved`` is ``invalid_grant``. Keep it fast: no network call.

        Default: :func:`mcp_oauth.authorization_server.organizations.policy.client_decision`
        (DCR/CIMD settings, the organization's trust rules, its ``OrganizationClient`` rows,
        ``client_approval_required``).
        """
        return organization_policy.client_decision(organization, application)

    def keeps_default_token_checks(self) -> bool:
        """Whether :meth:`authenticate_request` and :meth:`user_for_token` are :class:`DefaultMCPAdapter`'s,
        not overridden: then a token whose checks the shared cache can answer is accepted on the event
        loop (``mcp_oauth.resource_server.authentication.authenticate_bearer_cached``) without
        running them. Looked up on the class at each call: a class patched at run time is honoured."""
        kind = type(self)
        return (
            kind.authenticate_request is DefaultMCPAdapter.authenticate_request
            and kind.user_for_token is DefaultMCPAdapter.user_for_token
        )

    # --- token exchange (RFC 8693; mcp_oauth.authorization_server.token_exchange) -----------------

    def token_exchange_decision(
        self, request, client, subject_token, resource, scopes: list[str]
    ) -> TokenExchangeDecision:
        """Whether ``client`` may exchange ``subject_token`` for a token of ``resource`` with ``scopes``.

        Asked at the token endpoint (``request`` is oauthlib's request) for every
        ``urn:ietf:params:oauth:grant-type:token-exchange`` request that passed the grant's own
        checks: the client authenticated, ``subject_token`` (a DOT ``AccessToken``, with
        ``application`` and ``user`` loaded) is live and was issued to ``client``, ``resource`` (a
        :class:`~mcp_oauth.models.ProtectedResource`) is one of this server's and of the subject
        token's organization, ``scopes`` ⊆ the subject token's. A delegation is a ``resource`` not
        among ``subject_token.resource``. Keep it fast: no network call.

        :returns: a :class:`~mcp_oauth.authorization_server.token_exchange.decision.TokenExchangeDecision`
            (``allow()`` / ``refuse(error, description)`` from that module); refused: HTTP 400 with
            ``error`` (``unauthorized_client``, ``invalid_target``, ``invalid_scope`` or ``invalid_grant``).

        Default: refused, ``unauthorized_client``: a site allows the exchanges it wants.
        """
        return refuse("unauthorized_client", "This server does not exchange tokens for this client.")

    # --- session lengths (docs/how-to/session-lengths.md) ---------------------------------------

    def access_token_lifetime(self, request, seconds: int) -> int:
        """The access-token lifetime of this issuance, in seconds, given ``seconds``: the value the
        client, resource, organization and site settings decided
        (``mcp_oauth.authorization_server.tokens.lifetimes.access_token_lifetime``).

        ``request`` is oauthlib's token request (``request.client``, ``request.user`` — None for
        ``client_credentials`` — ``request.grant_type``, ``request.resource``, ``request.scopes``).
        Called once per token response, refreshes included; the value is the response's
        ``expires_in`` and the stored expiry. Keep it fast: no network call. A value below 1 counts
        as 1. Default: ``seconds``.
        """
        return seconds

    # --- skills (the Skills extension io.modelcontextprotocol/skills, docs/how-to/skills.md) ------

    def skill_visible(self, ctx, skill) -> bool:
        """Whether the request ``ctx`` may see ``skill`` in ``skills/list``, ``skills/get``,
        ``resources/list``, ``resources/read`` and ``resources/directory/read``.

        Asked only for a skill whose own limits already let the request through: the token has the
        skill's ``required_scopes`` and the request acts for one of its organizations (when it
        names any). A skill refused here is answered exactly like one that does not exist
        (``-32602``). Runs in a worker thread (the ORM may be used), once per skill per request.

        :param ctx: the request's ``RequestContext`` (``ctx.user``,
            ``ctx.scopes``, ``ctx.client_id``, ``ctx.organization``).
        :param skill: a ``mcp_oauth.mcp_server.skills.ServedSkill`` (``path``, ``name``,
            ``front_matter``, ``origin``: ``"folder"`` or ``"database"``, ``pk``, ``version``).
        :returns: True to show it. Default: True.
        """
        return True


def _folded(name: str) -> str:
    """``name`` in NFKC, case-folded, letters and digits only (how argument names are compared)."""
    return "".join(ch for ch in unicodedata.normalize("NFKC", name).casefold() if ch.isalnum())


def _redacted(value: Any, names: tuple[str, ...]) -> Any:
    folded = tuple(_folded(n) for n in names)
    return _redact(value, folded)


def _redact(value: Any, folded: tuple[str, ...]) -> Any:
    if isinstance(value, dict):
        return {
            key: "[redacted]" if any(n in _folded(str(key)) for n in folded) else _redact(item, folded)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_redact(item, folded) for item in value]
    return value


def get_adapter() -> DefaultMCPAdapter:
    """The adapter instance (``MCP_OAUTH["ADAPTER"]``, a dotted path or a class), resolved once.

    :raises ImportError: the dotted path does not import (``manage.py check`` reports it as
        ``mcp_oauth.E042``).
    """
    return mcp_oauth_settings.adapter


def check_settings() -> list:
    """System-check messages: ``mcp_oauth.E042`` when ``ADAPTER`` does not name a DefaultMCPAdapter subclass."""
    try:
        cls = mcp_oauth_settings.ADAPTER
    except ImportError as exc:
        return [Error(f'MCP_OAUTH["ADAPTER"] cannot be imported: {exc.__cause__ or exc}', id="mcp_oauth.E042")]
    if cls is not None and not (isinstance(cls, type) and issubclass(cls, DefaultMCPAdapter)):
        return [
            Error(
                'MCP_OAUTH["ADAPTER"] must name a subclass of mcp_oauth.adapter.DefaultMCPAdapter.', id="mcp_oauth.E042"
            )
        ]
    return []
