"""DOT's request validator with the MCP profile's resource rules (RFC 8707 §2).

Every token is bound to exactly one registered resource: the one requested, or
the default resource when none is; a resource we do not serve is refused with
``invalid_target``; a refresh without ``resource`` keeps the original binding.
"""

from __future__ import annotations

from oauthlib.oauth2.rfc6749 import errors
from oauth2_provider.oauth2_validators import OAuth2Validator

from .resources import InvalidTarget, select_resource


class MCPOAuth2Validator(OAuth2Validator):
    """``OAUTH2_VALIDATOR_CLASS`` of the MCP profile (installed by default)."""

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
