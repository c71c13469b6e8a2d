"""The one OAuth error type and its one renderer.

Every OAuth-style JSON error the app answers with — authorization-server guards, the token
and registration endpoints, throttling, the resource server's bearer challenges — is an
:class:`OAuthError` turned into a response by :func:`render_oauth_error` (the way DRF turns
``APIException`` into a response in its ``exception_handler``), so the headers those answers
need are never forgotten:

* ``Cache-Control: no-store`` and ``Pragma: no-cache`` on every error (OAuth 2.1 §3.2.3,
  RFC 6749 §5.1, RFC 6750 §3);
* ``WWW-Authenticate`` on every 401 (RFC 6750 §3, RFC 6749 §5.2, RFC 9110 §15.5.2): the
  challenge the raiser gives, else ``Bearer realm="<issuer>"`` plus the error code;
* ``Retry-After`` (seconds, RFC 9110 §10.2.3) when the error says when to come back (HTTP 429
  throttling, ``temporarily_unavailable``).

The body is ``{"error": <code>, "error_description": <text>}`` (RFC 6749 §5.2, RFC 7591
§3.2.2, RFC 6750 §3); an error without code (a bare challenge to a request that carried no
credentials, RFC 6750 §3.1) has only ``error_description``.

Views raise the error and let :func:`handle_oauth_errors` (function views) or
:class:`OAuthErrorMixin` (class-based views) render it; code that must return a response
calls :meth:`OAuthError.response`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse
from django.http.response import HttpResponseBase

from mcp_oauth.settings import mcp_oauth_settings


def _quote(value: str) -> str:
    """RFC 9110 quoted-string body: backslash-escape ``"`` and ``\\``; drop control characters."""
    value = "".join(ch for ch in str(value) if ch >= " " and ch != "\x7f")
    return value.replace("\\", "\\\\").replace('"', '\\"')


class OAuthError(Exception):
    """An OAuth error answer.

    :param error: the RFC error code (``invalid_request``, ``invalid_client``, ``invalid_grant``,
        ``invalid_client_metadata``, ``invalid_token``, ``insufficient_scope``, ``slow_down``,
        ``temporarily_unavailable`` …); None only for a bare RFC 6750 §3.1 challenge.
    :param description: ``error_description``: human-readable, names the offending field.
    :param status: HTTP status (400 unless the spec names another: 401, 403, 413, 429, 503).
    :param www_authenticate: the ``WWW-Authenticate`` value; required in spirit on a 401, so a
        default Bearer challenge is sent when it is omitted there.
    :param retry_after: seconds for ``Retry-After``.
    :param headers: any further headers.
    """

    def __init__(
        self,
        error: str | None,
        description: str = "",
        *,
        status: int = 400,
        www_authenticate: str | None = None,
        retry_after: int | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(description or error or "")
        self.error = error
        self.description = description
        self.status = status
        self.www_authenticate = www_authenticate
        self.retry_after = retry_after
        self.headers = dict(headers or {})

    def as_dict(self) -> dict[str, str]:
        """The JSON body: ``{"error", "error_description"}`` (either omitted when empty)."""
        body = {}
        if self.error:
            body["error"] = self.error
        if self.description:
            body["error_description"] = self.description
        return body

    def response(self) -> HttpResponse:
        """This error as an HTTP response (see :func:`render_oauth_error`)."""
        return render_oauth_error(self)

    def __repr__(self) -> str:
        return f"OAuthError({self.error!r}, {self.description!r}, status={self.status})"


def default_challenge(error: OAuthError) -> str:
    """``Bearer realm="<issuer>", error="<code>", error_description="…"`` for a 401 raised without one."""
    try:
        realm = mcp_oauth_settings.issuer
    except Exception:  # noqa: BLE001 - BASE_URL unset: still a valid challenge
        realm = "oauth"
    params = [("realm", realm)]
    if error.error:
        params.append(("error", error.error))
    if error.description:
        params.append(("error_description", error.description))
    return "Bearer " + ", ".join(f'{key}="{_quote(value)}"' for key, value in params)


def render_oauth_error(error: OAuthError) -> HttpResponse:
    """The one renderer: JSON body, status, ``Cache-Control: no-store``, ``WWW-Authenticate``, ``Retry-After``."""
    response = HttpResponse(json.dumps(error.as_dict()), status=error.status, content_type="application/json")
    response["Cache-Control"] = "no-store"
    response["Pragma"] = "no-cache"
    challenge = error.www_authenticate or (default_challenge(error) if error.status == 401 else None)
    if challenge:
        response["WWW-Authenticate"] = challenge
    if error.retry_after is not None:
        response["Retry-After"] = str(max(1, int(error.retry_after)))
    for header, value in error.headers.items():
        response[header] = value
    return response


def exception_handler(exc: Exception, request: HttpRequest | None = None) -> HttpResponse | None:
    """DRF-style handler: the response for an :class:`OAuthError`, None for any other exception."""
    if isinstance(exc, OAuthError):
        return render_oauth_error(exc)
    return None


def handle_oauth_errors(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Decorate a function view (or dispatch) so that a raised :class:`OAuthError` becomes its response."""

    @functools.wraps(view)
    def wrapper(*args, **kwargs) -> HttpResponse:
        try:
            return view(*args, **kwargs)
        except OAuthError as exc:
            return render_oauth_error(exc)

    return wrapper


if TYPE_CHECKING:
    from django.views import View as _ViewBase
else:
    _ViewBase = object


class OAuthErrorMixin(_ViewBase):
    """Class-based view mixin: an :class:`OAuthError` raised while dispatching is rendered.

    It goes before a :class:`~django.views.View` subclass in the view's bases (for the type
    checker it is declared against ``View``).
    """

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        try:
            return super().dispatch(request, *args, **kwargs)
        except OAuthError as exc:
            return render_oauth_error(exc)
