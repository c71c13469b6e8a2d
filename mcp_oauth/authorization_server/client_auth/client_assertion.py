"""``private_key_jwt`` client authentication (RFC 7523 §2.2, §3; OIDC Core §9; MCP ext-auth
"OAuth Client Credentials": JWT authentication, RECOMMENDED).

A request authenticates this way when it carries ``client_assertion_type =
urn:ietf:params:oauth:client-assertion-type:jwt-bearer`` and ``client_assertion``; the client is
the assertion's ``sub`` (a ``client_id`` parameter, when sent, must be the same). Its keys are
its registered ones:

* a client registered in the admin: ``ClientProfile.jwks`` or ``ClientProfile.jwks_uri``;
* a CIMD client (``client_id`` is a URL): the ``jwks`` or ``jwks_uri`` of its metadata document,
  which declares ``token_endpoint_auth_method: private_key_jwt``.

Checks (:func:`.assertions.verify_assertion`): an accepted asymmetric algorithm, the signature,
``iss`` = ``sub`` = ``client_id``, ``aud`` = our issuer (also the token endpoint URL when
``CLIENT_ASSERTION_ACCEPT_TOKEN_ENDPOINT_AUDIENCE``), ``exp`` / ``nbf`` / ``iat``, ``jti`` used once
(across workers). An ID-JAG (``typ: oauth-id-jag+jwt``) is never a client assertion. A request may
use one authentication method only (RFC 6749 §2.3): an assertion with a ``client_secret`` or a
Basic ``Authorization`` header is refused.

Every failure is ``invalid_client`` (RFC 6749 §5.2, HTTP 401), written to the audit log as
``assertion.refused`` (``assertion.replayed`` for a reused ``jti``).
"""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from oauthlib.oauth2.rfc6749 import errors

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.client_auth.assertions import (
    AssertionRefused,
    remember_jti,
    unverified,
    verify_assertion,
)
from mcp_oauth.authorization_server.client_auth.jwks import KeysUnavailable, signer_keys
from mcp_oauth.models import AuditEvent, ClientProfile
from mcp_oauth.settings import mcp_oauth_settings

CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
ID_JAG_TYP = "oauth-id-jag+jwt"
#: The registered ``token_endpoint_auth_method`` of a client authenticating this way (RFC 7591 §2).
PRIVATE_KEY_JWT = "private_key_jwt"


def has_client_assertion(request) -> bool:
    """Whether the token / revocation request tries ``private_key_jwt`` (either parameter present)."""
    return bool(getattr(request, "client_assertion", None) or getattr(request, "client_assertion_type", None))


def token_endpoint_url() -> str:
    """The token endpoint's absolute URL (as AS metadata publishes it)."""
    return mcp_oauth_settings.absolute(reverse("oauth2_provider:token"))


def accepted_audiences() -> list[str]:
    """The ``aud`` values a client assertion may carry: our issuer (and the token endpoint URL when allowed)."""
    audiences = [mcp_oauth_settings.issuer]
    if mcp_oauth_settings.CLIENT_ASSERTION_ACCEPT_TOKEN_ENDPOINT_AUDIENCE:
        audiences.append(token_endpoint_url())
    return audiences


def registered_keys(client, request) -> tuple[Any, str]:
    """``(jwks, jwks_uri)`` registered for ``client``: its CIMD document's, else its ``ClientProfile``'s."""
    document = getattr(request, "_mcp_cimd_document", None)
    if document is not None and getattr(request, "client", None) is client:
        if document.get("token_endpoint_auth_method") != PRIVATE_KEY_JWT:
            return None, ""
        return document.get("jwks"), document.get("jwks_uri") or ""
    row = ClientProfile.objects.filter(application=client).values_list("jwks", "jwks_uri").first()
    return (row[0], row[1] or "") if row else (None, "")


def _values(request, name: str) -> list[str]:
    return [value for key, value in (getattr(request, "decoded_body", None) or []) if key == name]


def _refuse(request, message: str, reason: str, client_id: str = "") -> errors.InvalidClientError:
    kind = AuditEvent.Kind.ASSERTION_REPLAYED if reason == "replay" else AuditEvent.Kind.ASSERTION_REFUSED
    record(
        kind,
        request=request,
        client_id=client_id[:255],
        detail={"assertion_kind": "client_assertion", "reason": reason, "description": message},
    )
    return errors.InvalidClientError(description=message, request=request)


def authenticate(validator, request) -> bool:
    """Authenticate the client of ``request`` by its ``client_assertion``; set ``request.client``.

    :param validator: the request validator (its ``_load_application`` resolves CIMD clients and
        applies the trust policy).
    :returns: True (the client is authenticated).
    :raises InvalidClientError: any failure (HTTP 401), audited.
    :raises InvalidRequestError: a parameter is repeated.
    """
    for name in ("client_assertion", "client_assertion_type"):
        if len(_values(request, name)) > 1:
            raise errors.InvalidRequestError(description=f"Duplicate {name} parameter.", request=request)
    if request.client_assertion_type != CLIENT_ASSERTION_TYPE:
        raise _refuse(request, f"client_assertion_type must be {CLIENT_ASSERTION_TYPE}.", "assertion_type")
    if not request.client_assertion:
        raise _refuse(request, "client_assertion is missing.", "malformed")
    if getattr(request, "client_secret", None) or validator._extract_basic_auth(request):
        raise _refuse(request, "Use one client authentication method per request (RFC 6749 §2.3).", "two_methods")
    try:
        _header, claims = unverified(request.client_assertion)
    except AssertionRefused as refused:
        raise _refuse(request, str(refused), refused.reason) from None
    client_id = claims.get("sub")
    if not isinstance(client_id, str) or not client_id or len(client_id) > 255:
        raise _refuse(request, "The client assertion's sub must be the client_id.", "sub")
    if request.client_id and request.client_id != client_id:
        raise _refuse(request, "client_id does not match the client assertion's sub.", "client_id", client_id)
    request.client_id = client_id
    client = validator._load_application(client_id, request)
    if client is None:
        raise _refuse(request, "Unknown client.", "unknown_client", client_id)
    jwks, jwks_uri = registered_keys(client, request)
    try:
        keys = signer_keys(jwks, jwks_uri, _header.get("kid") if isinstance(_header.get("kid"), str) else None)
        verified = verify_assertion(
            request.client_assertion,
            keys,
            audiences=accepted_audiences(),
            issuer=client_id,
            subject=client_id,
            forbidden_typ=ID_JAG_TYP,
        )
        remember_jti(verified, "client_assertion")
    except KeysUnavailable as unavailable:
        if unavailable.reason == "no_keys":
            raise _refuse(request, "This client is not registered for private_key_jwt.", "no_keys", client_id) from None
        raise _refuse(request, str(unavailable), unavailable.reason, client_id) from None
    except AssertionRefused as refused:
        raise _refuse(request, str(refused), refused.reason, client_id) from None
    request.client = client
    request._mcp_client_auth_method = PRIVATE_KEY_JWT
    return True
