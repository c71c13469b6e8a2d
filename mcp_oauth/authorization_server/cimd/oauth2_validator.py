"""The OAuth2 request-validator side of CIMD: URL client_ids are resolved by :mod:`mcp_oauth.authorization_server.cimd.cache`.

:class:`CIMDValidatorMixin` goes before DOT's ``OAuth2Validator`` in
:class:`~mcp_oauth.authorization_server.validator.MCPOAuth2Validator`. For a
client_id that looks like a URL it replaces DOT's ``resolve_cimd_application`` /
``refresh_if_stale`` path; any other client_id, and a URL-shaped client_id that an
administrator registered by hand, goes to DOT unchanged.

A refusal is raised as :class:`CIMDClientError`, an oauthlib ``FatalClientError``:
the authorization endpoint shows its error page and never redirects (RFC 6749
§4.1.2.1, OAuth 2.1 §4.1.2.1 — the client and its redirect URI are not verified);
the token endpoint answers ``{"error": "invalid_client" | "invalid_request" |
"temporarily_unavailable", "error_description": …}`` (503 with ``Retry-After`` for the last).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from oauth2_provider.models import get_application_model
from oauth2_provider.settings import oauth2_settings
from oauthlib.oauth2.rfc6749 import errors as oauth_errors

from mcp_oauth.authorization_server.cimd.cache import resolve_application
from mcp_oauth.authorization_server.cimd.errors import CIMDRefused, Unavailable
from mcp_oauth.authorization_server.cimd.metadata_document import redirect_uri_allowed

log = logging.getLogger("mcp_oauth.cimd")


class CIMDClientError(oauth_errors.InvalidClientError):
    """A CIMD client refused; ``error`` is the refusal's code, ``description`` its safe message.

    Status 400 (503 for ``temporarily_unavailable``); a ``FatalClientError``, so never redirected.
    """

    status_code = 400
    #: Seconds for ``Retry-After`` (``temporarily_unavailable`` only).
    retry_after: int | None = None

    def __init__(self, refused: CIMDRefused, request=None) -> None:
        super().__init__(description=str(refused), request=request)
        self.error = refused.error
        if isinstance(refused, Unavailable):
            self.status_code = 503
            self.retry_after = getattr(refused, "retry_after", None)

    @property
    def headers(self) -> dict[str, str]:
        """oauthlib's headers plus ``Retry-After`` (RFC 9110 §10.2.3) when the refusal is temporary."""
        headers = dict(super().headers)
        if self.retry_after:
            headers["Retry-After"] = str(self.retry_after)
        return headers


def looks_like_url(client_id) -> bool:
    """A client_id that claims to be a URL (``scheme://…``): it is handled as a CIMD client_id."""
    return isinstance(client_id, str) and "://" in client_id[:40]


if TYPE_CHECKING:
    from oauth2_provider.oauth2_validators import OAuth2Validator as _MixinBase
else:
    _MixinBase = object


class CIMDValidatorMixin(_MixinBase):
    """Resolve URL client_ids through the CIMD cache; check redirect URIs against the document.

    MCP 2025-11-25 "Client ID Metadata Documents": the AS MUST validate the fetched
    document and MUST validate the authorization request's redirect URI against it.
    """

    def _load_application(self, client_id, request):
        if not oauth2_settings.CIMD_ENABLED or not looks_like_url(client_id):
            return super()._load_application(client_id, request)
        Application = get_application_model()
        cached = getattr(request, "client", None)
        if (
            isinstance(cached, Application)
            and cached.client_id == client_id
            and getattr(request, "_mcp_cimd_document", None) is not None
        ):
            return cached
        try:
            manual = (
                Application.objects.filter(client_id=client_id)
                .exclude(registration_source=Application.RegistrationSource.CIMD)
                .first()
            )
        except ValueError:  # text the database cannot hold (a NUL): no such client
            manual = None
        if manual is not None:
            # An administrator registered this URL as an ordinary client_id: DOT's path.
            return super()._load_application(client_id, request)

        try:
            application, document = resolve_application(client_id, request)
        except CIMDRefused as refused:
            raise CIMDClientError(refused, request=request) from None
        except Exception:
            log.exception("CIMD: unexpected error resolving %r", client_id)
            raise CIMDClientError(
                CIMDRefused("The client's metadata document could not be processed."), request=request
            ) from None
        if not application.is_usable(request):
            return None
        request.client = application
        request._mcp_cimd_document = document
        return application

    def validate_redirect_uri(self, client_id, redirect_uri, request, *args, **kwargs):
        document = getattr(request, "_mcp_cimd_document", None)
        client = getattr(request, "client", None)
        if document is not None and client is not None and client.client_id == client_id:
            return redirect_uri_allowed(redirect_uri, document)
        return super().validate_redirect_uri(client_id, redirect_uri, request, *args, **kwargs)
