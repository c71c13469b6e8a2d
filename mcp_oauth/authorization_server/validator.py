"""DOT's request validator with the MCP profile's rules.

* Resources (RFC 8707 §2): every token is bound to exactly one registered
  resource: the one requested, or the default resource when none is; a resource we
  do not serve is refused with ``invalid_target``; a refresh without ``resource``
  keeps the original binding.
* Code replay (OAuth 2.1 §4.1.3, RFC 9700 §4.2.4): a code presented a second time
  is refused (``invalid_grant``) and, when the replay carries the right PKCE
  verifier, the tokens the code produced are revoked. A replay with a wrong
  verifier revokes nothing, so a guessed code cannot be used to log users out.
"""

from __future__ import annotations

import base64
import hashlib
import secrets

from oauth2_provider.models import get_access_token_model, get_grant_model, get_refresh_token_model
from oauth2_provider.oauth2_validators import OAuth2Validator
from oauthlib.oauth2.rfc6749 import errors

from ..models import RedeemedAuthorizationCode
from ..signals import authorization_code_replayed
from .resources import InvalidTarget, select_resource


def _checksum(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8")).hexdigest()


def _s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii", "replace")).digest()).rstrip(b"=").decode()


class MCPOAuth2Validator(OAuth2Validator):
    """``OAUTH2_VALIDATOR_CLASS`` of the MCP profile (installed by default)."""

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
        requested = self._requested_resources(request)
        try:
            request.resource = [select_resource(requested).uri] if requested else []
        except InvalidTarget as exc:
            raise errors.CustomOAuth2Error(error="invalid_target", description=str(exc), request=request) from None
        # DOT: narrowing against the grant / refresh token, inheritance when omitted.
        super()._check_and_set_request_resource(request)
        if not request.resource:
            try:
                request.resource = [select_resource([]).uri]
            except InvalidTarget as exc:
                raise errors.CustomOAuth2Error(
                    error="invalid_target", description=str(exc), request=request
                ) from None

    # --- code replay -----------------------------------------------------------------

    def validate_code(self, client_id, code, client, request, *args, **kwargs) -> bool:
        if super().validate_code(client_id, code, client, request, *args, **kwargs):
            request._mcp_code_challenge = (
                get_grant_model().objects.filter(code=code, application=client).values_list("code_challenge", flat=True).first()
                or ""
            )
            return True
        self._handle_replay(code, client, request)
        return False

    def _handle_replay(self, code, client, request) -> None:
        redeemed = RedeemedAuthorizationCode.objects.filter(code_checksum=_checksum(code), application=client).first()
        if redeemed is None:
            return
        verifier = getattr(request, "code_verifier", None) or ""
        if not (redeemed.code_challenge and verifier and secrets.compare_digest(_s256(verifier), redeemed.code_challenge)):
            return
        if redeemed.access_token_id is not None:
            access_token = get_access_token_model().objects.filter(pk=redeemed.access_token_id).first()
            if access_token is not None:
                access_token.revoke()
        if redeemed.token_family is not None:
            get_refresh_token_model().revoke_family(redeemed.token_family)
        authorization_code_replayed.send(sender=RedeemedAuthorizationCode, redeemed=redeemed, application=client)

    def _create_access_token(self, expires, request, token, source_refresh_token=None):
        access_token = super()._create_access_token(expires, request, token, source_refresh_token=source_refresh_token)
        request._mcp_access_token = access_token
        return access_token

    def _create_refresh_token(self, request, refresh_token_code, access_token, previous_refresh_token):
        refresh_token = super()._create_refresh_token(request, refresh_token_code, access_token, previous_refresh_token)
        request._mcp_token_family = getattr(refresh_token, "token_family", None)
        return refresh_token

    def invalidate_authorization_code(self, client_id, code, request, *args, **kwargs) -> None:
        super().invalidate_authorization_code(client_id, code, request, *args, **kwargs)
        RedeemedAuthorizationCode.objects.create(
            code_checksum=_checksum(code),
            application=request.client,
            code_challenge=getattr(request, "_mcp_code_challenge", "") or "",
            access_token=getattr(request, "_mcp_access_token", None),
            token_family=getattr(request, "_mcp_token_family", None),
        )
