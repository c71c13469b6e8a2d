"""DOT's request validator with the MCP profile's rules.

* Resources (RFC 8707 §2): every token is bound to exactly one registered
  resource: the one requested, or the default resource when none is; a resource we
  do not serve is refused with ``invalid_target``; a refresh without ``resource``
  keeps the original binding.
* Code replay (OAuth 2.1 §4.1.3, RFC 9700 §4.2.4): a code presented a second time
  is refused (``invalid_grant``) and, when the replay carries the right PKCE
  verifier, the tokens the code produced are revoked. A replay with a wrong
  verifier revokes nothing, so a guessed code cannot be used to log users out.
  The code is consumed (grant row deleted, redemption record written with the
  issued token ids) in the transaction that saves the tokens, so a replay racing
  the first exchange waits for it and then revokes what it issued.
  Replays that would change nothing more are refused from a cache marker before any
  database work (:mod:`.redeemed`).
* Trust policy (:mod:`mcp_oauth.authorization_server.client_registry.trust`): a grant to a client that is denied or held
  for review is refused with ``invalid_client`` (RFC 6749 §5.2), whatever the grant
  type, so blocking a client also stops its refresh tokens.
* Organizations (:mod:`mcp_oauth.authorization_server.organizations.token_binding`): the
  organization chosen on the consent page is stored with the code and carried to the tokens and
  their refreshes; its membership, client policy, scopes and lifetimes apply to every grant.
* Audit (:mod:`mcp_oauth.audit`): ``token.issued``, ``token.refreshed``,
  ``token.revoked``, ``token.refresh_reuse``, ``resource.invalid`` and (through the
  :data:`~mcp_oauth.signals.authorization_code_replayed` signal) ``code.replay``.
  ``ClientProfile.last_used_at`` is set when a token is issued or refreshed.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connections, router, transaction
from django.utils import timezone
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.audit import announce, new_event, record
from mcp_oauth.authorization_server.cimd.oauth2_validator import CIMDValidatorMixin
from mcp_oauth.authorization_server.client_auth import client_assertion
from mcp_oauth.authorization_server.client_auth.client_authentication import check_client_secret
from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.authorization_server.client_registry.clients import cached_application
from mcp_oauth.authorization_server.enterprise_identity import providers as enterprise
from mcp_oauth.authorization_server.enterprise_identity.jwt_bearer import JWT_BEARER_GRANT_TYPE
from mcp_oauth.authorization_server.organizations.token_binding import (
    bind_organization,
    bound_organization_id,
    remember_code_organization,
)
from mcp_oauth.authorization_server.token_endpoint.dpop import bind_grant
from mcp_oauth.authorization_server.token_endpoint.resource_selection import InvalidTarget, select_resource
from mcp_oauth.authorization_server.token_exchange.actor import bind_exchange, revoke_exchanged
from mcp_oauth.authorization_server.token_exchange.decision import TOKEN_EXCHANGE_GRANT_TYPE
from mcp_oauth.authorization_server.token_exchange.inprocess import inprocess_client
from mcp_oauth.authorization_server.tokens import jwt_access
from mcp_oauth.authorization_server.tokens.redeemed import mark_revoked, remember_redeemed
from mcp_oauth.authorization_server.tokens.rotation import RefreshRotationMixin, revoke_family, take_write_lock
from mcp_oauth.models import AuditEvent, ClientProfile, RedeemedAuthorizationCode
from mcp_oauth.resource_server.cache import token_checksum
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared.db import cursor as db_cursor
from mcp_oauth.shared.db import insert
from mcp_oauth.shared.redirect_uris import redirect_scheme_allowed, redirect_uri_registered
from mcp_oauth.signals import authorization_code_replayed

#: ``ClientProfile.last_used_at`` is written at most once per this many seconds per client and worker.
LAST_USED_RESOLUTION_SECONDS = 60
_last_used: dict[tuple[Any, str], float] = {}


def _mark_used(client) -> None:
    """Set the client's ``ClientProfile.last_used_at`` (what unused dynamic clients are pruned by),
    to within :data:`LAST_USED_RESOLUTION_SECONDS`: a busy client costs no write per grant."""
    key = (client.pk, client.client_id)
    now = time.monotonic()
    if now - _last_used.get(key, -LAST_USED_RESOLUTION_SECONDS) < LAST_USED_RESOLUTION_SECONDS:
        return
    if len(_last_used) > 10_000:
        _last_used.clear()
    at = timezone.now()
    if not ClientProfile.objects.filter(application=client).update(last_used_at=at):
        ClientProfile.objects.get_or_create(application=client, defaults={"last_used_at": at})
    _last_used[key] = now


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii", "replace")).digest()).rstrip(b"=").decode()


class MCPOAuth2Validator(RefreshRotationMixin, CIMDValidatorMixin, OAuth2Validator):
    """``OAUTH2_VALIDATOR_CLASS`` of the MCP profile (installed by default)."""

    def _check_secret(self, provided_secret, stored_secret) -> bool:
        """Constant-time, fast for machine secrets, legacy hashes upgraded, failures throttled (:mod:`..client_secrets`)."""
        return check_client_secret(provided_secret, stored_secret)

    def validate_response_type(self, client_id, response_type, client, request, *args, **kwargs) -> bool:
        """Only ``code`` (OAuth 2.1 §4.1.1); anything else, hybrid ``code token`` included, is
        ``unsupported_response_type`` (RFC 6749 §4.1.2.1), not ``unauthorized_client``.

        :raises UnsupportedResponseTypeError: for any other response type.
        """
        if response_type != "code":
            raise errors.UnsupportedResponseTypeError(request=request)
        return super().validate_response_type(client_id, response_type, client, request, *args, **kwargs)

    def authenticate_client(self, request, *args, **kwargs) -> bool:
        """DOT's client authentication; a *public* client asking for ``client_credentials`` without
        credentials is ``unauthorized_client`` (RFC 6749 §5.2: the grant is not for it), not
        ``invalid_client``.

        A request with ``client_assertion`` authenticates by ``private_key_jwt`` (:mod:`.client_assertion`).

        :raises UnauthorizedClientError: that case (HTTP 400).
        :raises InvalidClientError: a refused client assertion (HTTP 401).
        """
        if client_assertion.has_client_assertion(request):
            return client_assertion.authenticate(self, request)
        if self._inprocess_exchange(request):
            return True
        if super().authenticate_client(request, *args, **kwargs):
            return True
        if (
            request.grant_type == "client_credentials"
            and not getattr(request, "client_secret", None)
            and not (request.headers.get("Authorization") or request.headers.get("HTTP_AUTHORIZATION"))
            and isinstance(request.client_id, str)
        ):
            client = get_application_model().objects.filter(client_id=request.client_id).first()
            if client is not None and client.client_type == client.CLIENT_PUBLIC:
                raise errors.UnauthorizedClientError(
                    description="A public client cannot use the client_credentials grant.", request=request
                )
        return False

    def client_authentication_required(self, request, *args, **kwargs) -> bool:
        """DOT's rule, and always when the request carries a ``client_assertion`` (RFC 7523 §2.2)
        or is a tool's in-process token exchange (:meth:`_inprocess_exchange`)."""
        return (
            client_assertion.has_client_assertion(request)
            or self._inprocess_client_for(request) is not None
            or super().client_authentication_required(request, *args, **kwargs)
        )

    @staticmethod
    def _inprocess_client_for(request) -> Any:
        """The client of a tool's in-process token exchange of this request
        (:mod:`mcp_oauth.authorization_server.token_exchange.inprocess`), else None."""
        client = inprocess_client()
        if client is None or getattr(request, "grant_type", None) != TOKEN_EXCHANGE_GRANT_TYPE:
            return None
        return client if getattr(request, "client_id", None) == client.client_id else None

    def _inprocess_exchange(self, request) -> bool:
        """A tool's in-process token exchange authenticates its client by the subject token it
        presents (the grant checks that the token was issued to this client); the trust policy
        applies as to any token request."""
        client = self._inprocess_client_for(request)
        if client is None:
            return False
        request.client = None
        loaded = self._load_application(client.client_id, request)
        if loaded is None:
            return False
        request.client = loaded
        request._mcp_client_auth_method = "subject_token"
        return True

    def validate_grant_type(self, client_id, grant_type, client, request, *args, **kwargs) -> bool:
        """DOT's rule; the JWT bearer grant (ID-JAG) is for the allowed clients of an enabled
        enterprise identity provider (:func:`.enterprise.client_may_redeem`), while
        ``MCP_OAUTH["ENTERPRISE_MANAGED_AUTHORIZATION"]`` is on."""
        if grant_type == JWT_BEARER_GRANT_TYPE:
            return bool(mcp_oauth_settings.ENTERPRISE_MANAGED_AUTHORIZATION) and enterprise.client_may_redeem(client)
        if grant_type == TOKEN_EXCHANGE_GRANT_TYPE:  # RFC 8693: the adapter decides each exchange
            return bool(mcp_oauth_settings.TOKEN_EXCHANGE)
        return super().validate_grant_type(client_id, grant_type, client, request, *args, **kwargs)

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs) -> bool:
        """Exact string match with a registered URI, loopback ports aside, and never plain ``http``
        off loopback, however the client was registered (:mod:`.redirects`)."""
        return (
            redirect_scheme_allowed(redirect_uri)
            and super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)
            and redirect_uri_registered(redirect_uri, request.client.redirect_uris.split())
        )

    # --- resources -----------------------------------------------------------------

    def _requested_resources(self, request) -> list[str]:
        values = [value for key, value in (getattr(request, "decoded_body", None) or []) if key == "resource"]
        if not values:
            raw = getattr(request, "resource", None)
            if isinstance(raw, str):
                values = [raw]
            elif isinstance(raw, list):
                values = list(raw)
        return [value for value in values if value != ""]

    def _check_and_set_request_resource(self, request) -> None:
        bound = getattr(request, "_mcp_assertion_resource", None)
        if bound is not None:  # the ID-JAG's resource, checked by the grant (.jwt_bearer)
            request.resource = [bound]
            return
        requested = self._requested_resources(request)
        try:
            request.resource = [select_resource(requested).uri] if requested else []
        except InvalidTarget as exc:
            # Audited by save_bearer_token once its transaction is rolled back.
            request._mcp_invalid_resource = {
                "endpoint": "token",
                "grant_type": request.grant_type,
                "resource": requested,
                "description": str(exc),
            }
            raise errors.CustomOAuth2Error(error="invalid_target", description=str(exc), request=request) from None
        # DOT: narrowing against the grant / refresh token, inheritance when omitted.
        super()._check_and_set_request_resource(request)
        if not request.resource:
            try:
                request.resource = [select_resource([]).uri]
            except InvalidTarget as exc:
                raise errors.CustomOAuth2Error(error="invalid_target", description=str(exc), request=request) from None

    def _resolved_resources(self, request) -> list[str]:
        """The resources the grant's tokens are bound to, resolved ahead of the token save (which
        resolves them again, to the same: :meth:`_check_and_set_request_resource` is idempotent)."""
        self._check_and_set_request_resource(request)
        return list(request.resource or [])

    def prepare_lifetime(self, request) -> None:
        """Bind the request to its resources and organization ahead of its lifetime
        (:func:`mcp_oauth.authorization_server.tokens.lifetimes.access_token_lifetime`, called by
        oauthlib before the token is drawn): ``request.resource`` and
        ``request.mcp_lifetime_organization_id``.

        :raises oauthlib.oauth2.rfc6749.errors.OAuth2Error: the resource is refused (the token save
            raises it again, audited).
        """
        self._check_and_set_request_resource(request)
        request.mcp_lifetime_organization_id = bound_organization_id(request)

    # --- code replay -----------------------------------------------------------------

    def validate_code(self, client_id, code, client, request, *args, **kwargs) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            request._mcp_code_challenge = (
                get_grant_model()
                .objects.filter(code=code, application=client)
                .values_list("code_challenge", flat=True)
                .first()
                or ""
            )
            return True
        self._handle_replay(code, client, request)
        return False

    def _handle_replay(self, code, client, request) -> None:
        redeemed = RedeemedAuthorizationCode.objects.filter(
            code_checksum=token_checksum(code), application=client
        ).first()
        if redeemed is None:
            return
        verifier = getattr(request, "code_verifier", None) or ""
        if not (
            redeemed.code_challenge and verifier and secrets.compare_digest(_s256(verifier), redeemed.code_challenge)
        ):
            return
        if redeemed.access_token_id is not None:
            access_token = get_access_token_model().objects.filter(pk=redeemed.access_token_id).first()
            if access_token is not None:
                access_token.revoke()
        if redeemed.token_family is not None:
            revoke_family(redeemed.token_family)
        mark_revoked(code, client.client_id, redeemed.code_challenge)
        authorization_code_replayed.send(
            sender=RedeemedAuthorizationCode, redeemed=redeemed, application=client, request=request
        )

    def _create_access_token(self, expires, request, token, source_refresh_token=None):
        """DOT's access token (:meth:`_new_access_token`), inserted with :func:`mcp_oauth.shared.db.insert`."""
        access_token = insert(self._new_access_token(expires, request, token, source_refresh_token))
        request._mcp_access_token = access_token
        return access_token

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        refresh_token = super()._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)
        request._mcp_token_family = getattr(refresh_token, "token_family", None)
        return refresh_token

    def save_authorization_code(self, client_id, code, request, *args, **kwargs) -> None:
        """Store the code; a ``code_challenge`` seen before (on a pending or a redeemed code) is recorded as a
        suspicious ``pkce.challenge_reused`` event (RFC 9700 §2.1.1: a challenge is per authorization request).

        The code is still issued: the verifier stays secret, so a replayed challenge alone gains nothing,
        but a client that reuses its PKCE pair, or a copied authorization request, shows in the audit log.
        """
        challenge = getattr(request, "code_challenge", None) or ""
        reused = bool(challenge) and (
            get_grant_model().objects.filter(code_challenge=challenge).exists()
            or RedeemedAuthorizationCode.objects.filter(code_challenge=challenge).exists()
        )
        organization_id = getattr(request, "mcp_organization_id", None)
        if type(organization_id) is int:  # the organization chosen on the consent page, before the grant row
            remember_code_organization(code["code"], organization_id)
        super().save_authorization_code(client_id, code, request, *args, **kwargs)
        if reused:
            record(
                AuditEvent.Kind.PKCE_CHALLENGE_REUSED,
                request=request,
                user=request.user if getattr(request.user, "pk", None) else None,
                client_id=getattr(request.client, "client_id", "") or client_id or "",
                detail={"redirect_host": urlsplit(getattr(request, "redirect_uri", "") or "").hostname},
            )

    def _save_bearer_token(self, token, request, *args, **kwargs):
        """Save the tokens; for the code grant, consume the code in the same transaction.

        The grant row is deleted and its :class:`RedeemedAuthorizationCode` (with the ids of the
        tokens just saved) created before the token rows commit. A concurrent exchange of the
        same code blocks on the grant row's lock until this transaction ends, then deletes
        nothing: it is the replay (``invalid_grant``), its own tokens roll back, and, once its
        transaction is gone, it finds the committed redemption record and revokes what the
        winner issued (:meth:`save_bearer_token`, OAuth 2.1 §4.1.3).
        """
        with db_cursor(router.db_for_write(get_access_token_model())):  # one cursor for the grant's statements
            result = super()._save_bearer_token(token, request, *args, **kwargs)
            if request.grant_type == "authorization_code":
                deleted, _ = get_grant_model().objects.filter(code=request.code, application=request.client).delete()
                if not deleted:
                    request._mcp_code_race_lost = True
                    raise errors.InvalidGrantError(
                        description="The authorization code was already used.", request=request
                    )
                self._record_redemption(request.code, request)
                request._mcp_code_redeemed = True
            # The grant's audit event commits with its tokens; it is announced once they are committed.
            # A rotation written as one statement wrote it along (_rows_written_with_rotation).
            if getattr(request, "_mcp_grant_event", None) is None:
                request._mcp_grant_event = self._write_grant_event(token, request)
        return result

    def _rows_written_with_rotation(self, token, request) -> list[Any]:
        """The grant's audit event, written by the rotation's statement (:mod:`.rotation_statement`)."""
        event = self._grant_event(token, request)
        request._mcp_grant_event = event
        return [event]

    def _write_grant_event(self, token, request) -> AuditEvent:
        """Write the ``token.issued`` / ``token.refreshed`` event of a saved grant (not announced)."""
        return insert(self._grant_event(token, request))

    def _grant_event(self, token, request) -> AuditEvent:
        """The ``token.issued`` / ``token.refreshed`` event of a grant, unsaved."""
        refreshed = request.grant_type == "refresh_token"
        return new_event(
            AuditEvent.Kind.TOKEN_REFRESHED if refreshed else AuditEvent.Kind.TOKEN_ISSUED,
            request=request,
            user=request.user if getattr(request.user, "pk", None) else None,
            client_id=request.client.client_id,
            detail={
                "grant_type": request.grant_type,
                "scope": token.get("scope", ""),
                "resource": list(getattr(request, "resource", None) or []),
                "expires_in": token.get("expires_in"),
                "refresh_token_issued": "refresh_token" in token,
                **({"grace_sibling": True} if getattr(request, "_mcp_generation", (None, False))[1] else {}),
                **getattr(request, "_mcp_grant_detail", {}),  # ID-JAG: idp, sub
                **(
                    {"client_auth": request._mcp_client_auth_method}
                    if getattr(request, "_mcp_client_auth_method", None)
                    else {}
                ),
            },
        )

    def _record_redemption(self, code, request) -> None:
        RedeemedAuthorizationCode.objects.create(
            code_checksum=token_checksum(code),
            application=request.client,
            code_challenge=getattr(request, "_mcp_code_challenge", "") or "",
            access_token=getattr(request, "_mcp_access_token", None),
            token_family=getattr(request, "_mcp_token_family", None),
        )
        remember_redeemed(code, request.client.client_id, getattr(request, "_mcp_code_challenge", "") or "")

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs) -> None:
        if getattr(request, "_mcp_code_redeemed", False):
            return  # consumed with the token save (_save_bearer_token)
        super().invalidate_authorization_code(client_id, code, request, *args, **kwargs)
        self._record_redemption(code, request)

    def _grant_pkce(self, code, request) -> tuple[str, str]:
        """The grant's PKCE challenge and method, read once per request (oauthlib asks for each);
        a grant consumed since :meth:`validate_code` is a racing replay.

        :raises InvalidGrantError: the grant is gone (the replay is handled first).
        """
        cached = getattr(request, "_mcp_grant_pkce", None)
        if cached is not None and cached[0] == code:
            return cached[1]
        row = (
            get_grant_model()
            .objects.filter(code=code, application=request.client)
            .values_list("code_challenge", "code_challenge_method")
            .first()
        )
        if row is None:
            self._handle_replay(code, request.client, request)
            raise errors.InvalidGrantError(description="The authorization code was already used.", request=request)
        request._mcp_grant_pkce = (code, row)
        return row

    def get_code_challenge(self, code, request):
        """The grant's PKCE challenge (None: none was sent)."""
        return self._grant_pkce(code, request)[0] or None

    def get_code_challenge_method(self, code, request):
        """The grant's PKCE method (None: none was sent)."""
        return self._grant_pkce(code, request)[1] or None

    # --- trust policy -------------------------------------------------------------------

    def _load_application(self, client_id, request):
        if getattr(request, "grant_type", None) and not getattr(request, "client", None):
            # Token requests: the client from this worker's memory when it is current (.clients);
            # DOT reuses request.client when it matches client_id.
            request.client = cached_application(client_id)
        client = super()._load_application(client_id, request)
        # Token requests only: revocation and introspection stay open to a blocked client,
        # and the authorization view applies the policy itself (with an error page).
        if client is None or not getattr(request, "grant_type", None):
            return client
        if getattr(request, "_mcp_trusted_client", None) is client:
            return client  # judged already in this request
        verdict = mcp_oauth_settings.adapter.trust_verdict(client)
        if verdict.allowed:
            request._mcp_trusted_client = client
            return client
        if not getattr(request, "_mcp_trust_recorded", False):
            trust.record_denial(verdict, request=request, client_id=client.client_id, stage="token")
            request._mcp_trust_recorded = True
        request.client = None
        raise trust.UntrustedClientTokenError(description=verdict.user_message, request=request)

    # --- audit ------------------------------------------------------------------------

    def save_bearer_token(self, token, request, *args, **kwargs):
        try:
            try:
                # The organization's rows, scopes and lifetimes, then DPoP (RFC 9449 §5): before any token row.
                resources = functools.cache(lambda: self._resolved_resources(request))  # resolved once
                with _exchange_transaction(request):  # the subject token locked: no revocation between
                    bind_organization(token, request, resources)
                    bind_exchange(token, request)  # RFC 8693: no longer than the subject token; its act
                    bind_grant(token, request, resources)
                    jwt_access.mint(token, request, resources)  # RFC 9068, for a resource that opted in
                    result = super().save_bearer_token(token, request, *args, **kwargs)
            except IntegrityError:
                if _parties_exist(request):
                    raise
                # The commit's foreign-key checks: the client or the user was deleted while the
                # grant's rows were written (a grace sibling locks generations, not the client).
                raise errors.InvalidGrantError(
                    description="The client or the user of this grant is gone.", request=request
                ) from None
        except errors.OAuth2Error:
            if getattr(request, "_mcp_code_race_lost", False):
                # Our transaction is rolled back; the winner's has committed its redemption record.
                self._handle_replay(request.code, request.client, request)
            invalid = getattr(request, "_mcp_invalid_resource", None)
            if invalid is not None:
                record(
                    AuditEvent.Kind.INVALID_RESOURCE,
                    request=request,
                    client_id=getattr(request.client, "client_id", "") or "",
                    detail=invalid,
                )
            raise
        client = request.client
        event = getattr(request, "_mcp_grant_event", None)
        if event is None:  # a subclass saved the tokens without this class's _save_bearer_token
            event = self._write_grant_event(token, request)
        announce(event)
        _mark_used(client)
        return result

    def revoke_token(self, token, token_type_hint, request, *args, **kwargs):
        application_pk = getattr(request.client, "pk", None)
        checksum = token_checksum(token)
        found = None
        subject_checksums = [checksum]  # the tokens exchanged for it go with it (RFC 8693)
        if application_pk is not None:
            for model, kind in (
                (get_access_token_model(), "access_token"),
                (get_refresh_token_model(), "refresh_token"),
            ):
                row = model.objects.filter(token_checksum=checksum, application_id=application_pk).first()
                if row is not None and (kind == "access_token" or row.revoked is None):
                    found = (row, kind)
                    if kind == "refresh_token" and row.access_token_id is not None:
                        subject_checksums.append(
                            get_access_token_model()
                            .objects.filter(pk=row.access_token_id)
                            .values_list("token_checksum", flat=True)
                            .first()
                            or ""
                        )
                    break
        with transaction.atomic(using=router.db_for_write(get_refresh_token_model())):
            # SQLite: queue for the write lock behind a rotation in flight; DOT's revoke() reads
            # first and would fail at once with "database is locked" (rotation.take_write_lock).
            take_write_lock()
            super().revoke_token(token, token_type_hint, request, *args, **kwargs)
            exchanged = revoke_exchanged(subject_checksums) if found is not None else 0
        if found is not None:
            row, kind = found
            record(
                AuditEvent.Kind.TOKEN_REVOKED,
                request=request,
                user=row.user,
                client_id=request.client.client_id,
                detail={
                    "via": "revocation_endpoint",
                    "token_type": kind,
                    "token_id": row.pk,
                    **({"exchanged_tokens": exchanged} if exchanged else {}),
                },
            )


@contextmanager
def _exchange_transaction(request: Any) -> Iterator[None]:
    """For a token-exchange grant (RFC 8693), the transaction its rows are written in (nothing otherwise).

    :func:`~mcp_oauth.authorization_server.token_exchange.actor.bind_exchange` locks the subject
    token's row in it, so a revocation of the subject token (which deletes that row, then revokes
    what was exchanged for it) runs wholly before the exchange, which then finds no subject token,
    or wholly after it, and revokes the new token too. SQLite has no row locks: the transaction
    takes the write lock first.
    """
    if request.grant_type != TOKEN_EXCHANGE_GRANT_TYPE:
        yield
        return
    with transaction.atomic(using=router.db_for_write(get_access_token_model())):
        take_write_lock()
        yield


def _parties_exist(request) -> bool:
    """Whether the client and the user of a grant whose rows failed a foreign-key check still exist
    (True when that cannot be told: the failure is then not theirs to explain)."""
    if any(connections[alias].in_atomic_block for alias in connections):
        return True  # inside a caller's transaction: no query until it rolls back
    try:
        client, user = getattr(request, "client", None), getattr(request, "user", None)
        if client is not None and not type(client).objects.filter(pk=client.pk).exists():
            return False
        return user is None or get_user_model().objects.filter(pk=user.pk).exists()
    except Exception:  # noqa: BLE001 - the original error is the one to raise
        return True
