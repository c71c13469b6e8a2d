"""Request guards for the form-encoded OAuth endpoints (token, revocation, introspection).

Before DOT and oauthlib see a request, refuse what would otherwise become a
wrong answer or a 500, with the JSON error RFC 6749 §5.2 names and
``Cache-Control: no-store``:

* a body over Django's limits -> 413 ``invalid_request``;
* a repeated parameter (OAuth 2.1 §3.1: "Request and response parameters
  defined by this specification MUST NOT be included more than once"; RFC 8707
  ``resource`` may repeat) -> 400 ``invalid_request``;
* parameters or HTTP Basic credentials that are not storable text (NUL,
  invalid UTF-8, bad base64) -> 400 ``invalid_request`` / 401 ``invalid_client``;
* a parameter whose name starts with ``_`` or ``mcp_`` (:data:`RESERVED_PREFIXES`) -> 400
  ``invalid_request``: oauthlib's request answers attribute lookups from the request's
  parameters, and the request validator keeps its own state in such attributes (the ID-JAG's
  resource, the grant's organization, its audit event), which a client must never set;

and bind the request as the caller whose failed client authentications are throttled
(:func:`mcp_oauth.authorization_server.client_auth.client_authentication.authenticating_caller`).
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable
from urllib.parse import unquote_plus

from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent
from django.http import HttpRequest, HttpResponse

from mcp_oauth.authorization_server.client_auth.client_authentication import authenticating_caller
from mcp_oauth.errors import OAuthError, handle_oauth_errors
from mcp_oauth.shared.text import request_params_storable, storable

#: Parameters that may repeat (RFC 8707 §2).
REPEATABLE = frozenset({"resource"})
#: Parameter names no client may send: the request validator's own attributes on oauthlib's request.
RESERVED_PREFIXES = ("_", "mcp_")


def check_basic_credentials(header: str | None) -> bool:
    """Whether an ``Authorization: Basic`` header decodes to storable ``id:secret`` text (RFC 6749 §2.3.1)."""
    if not header or not header[:6].lower() == "basic ":
        return True
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError):
        return False
    if ":" not in decoded:
        return False
    return storable([unquote_plus(part) for part in decoded.split(":", 1)])


def guard_oauth_form(view: Callable) -> Callable:
    """Decorate a form-encoded OAuth endpoint with the checks of this module."""

    @functools.wraps(view)
    @handle_oauth_errors
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if request.method == "POST":
            try:
                post = request.POST
            except RequestDataTooBig:
                raise OAuthError("invalid_request", "The request body is too large.", status=413) from None
            except TooManyFieldsSent:
                raise OAuthError("invalid_request", "The request has too many parameters.", status=413) from None
            for params in (request.GET, post):
                for key, values in params.lists():
                    if len(values) > 1 and key not in REPEATABLE:
                        raise OAuthError("invalid_request", f"The parameter {key} is repeated.")
                    if key.startswith(RESERVED_PREFIXES):
                        raise OAuthError("invalid_request", "A parameter name is reserved by this server.")
            if not request_params_storable(request):
                raise OAuthError(
                    "invalid_request", "Parameters must be text without NUL characters or unpaired surrogates."
                )
            if not check_basic_credentials(request.headers.get("Authorization")):
                # RFC 6749 §5.2: the challenge names the scheme the client used.
                raise OAuthError(
                    "invalid_client",
                    "The client credentials are malformed.",
                    status=401,
                    www_authenticate='Basic realm="oauth"',
                )
        with authenticating_caller(request):
            return view(request, *args, **kwargs)

    return wrapper
