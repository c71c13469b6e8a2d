"""RFC 7591 dynamic client registration: DOT's endpoint, completed.

* Responses carry everything RFC 7591 §3.2.1 asks for: ``client_id_issued_at``,
  ``client_secret_expires_at`` whenever a secret is issued, and the accepted
  metadata echoed back (``scope``, ``client_uri``, ``logo_uri``, …).
* ``token_endpoint_auth_method`` is echoed as requested (``none`` makes a public client).
* Unknown members are ignored (§2); a refused registration names the field.
* Redirect URIs must be https, or http on a loopback host (OAuth 2.1 §2.3.1,
  RFC 8252 §7.3; loopback ones then match on any port).
* Anonymous registration is open to public clients only, unless
  ``DCR_ALLOW_ANONYMOUS_CONFIDENTIAL`` says otherwise.
* The trust policy applies (:class:`mcp_oauth.authorization_server.client_registry.trust.TrustPolicyDCRPermission`, first of
  the default ``DCR_REGISTRATION_PERMISSION_CLASSES``): a denied registration gets
  403 ``access_denied``.
* ``scope`` is narrowed to the scopes served here and the subset returned (RFC 7591 §3.2.1,
  :func:`narrow_scope`); a public client may not register ``client_credentials`` alone.
* Throttled under the ``register`` scope (429 ``slow_down`` with ``Retry-After``, see
  :mod:`mcp_oauth.shared.throttling`), and identical registrations from one address under
  ``register_identical`` (:mod:`.registration_limits`); every accepted registration is audited
  (``client.registered``).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import RequestDataTooBig, ValidationError
from django.core.validators import URLValidator
from django.db import transaction
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import csrf_exempt
from oauth2_provider.compat import login_not_required
from oauth2_provider.dcr import IsAuthenticatedDCRPermission
from oauth2_provider.models import get_application_model
from oauth2_provider.scopes import get_scopes_backend
from oauth2_provider.settings import oauth2_settings
from oauth2_provider.views import DynamicClientRegistrationManagementView, DynamicClientRegistrationView

from mcp_oauth.audit import record
from mcp_oauth.authorization_server.client_registry import trust
from mcp_oauth.authorization_server.client_registry.registration_limits import enforce_identical_budget
from mcp_oauth.dpop.metadata import dpop_registration_metadata
from mcp_oauth.errors import OAuthError, OAuthErrorMixin
from mcp_oauth.models import AuditEvent, ClientProfile
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.shared import throttling
from mcp_oauth.shared.loopback import is_loopback_host
from mcp_oauth.shared.text import has_invisible_format_characters, storable

#: Client metadata (RFC 7591 §2) that is stored and echoed back when accepted.
ECHOED_STRING_FIELDS = (
    "client_name",
    "scope",
    "client_uri",
    "logo_uri",
    "tos_uri",
    "policy_uri",
    "software_id",
    "software_version",
    "application_type",
    "jwks_uri",
)
URI_FIELDS = ("client_uri", "logo_uri", "tos_uri", "policy_uri", "jwks_uri")
AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
GRANT_TYPES = ("authorization_code", "refresh_token", "client_credentials")
#: Longest accepted values (the columns they are stored in); other strings: 2000.
MAX_LENGTHS = {"client_name": 255, "client_uri": 500, "logo_uri": 500, "tos_uri": 2000, "policy_uri": 2000}
#: At most this many ``redirect_uris``, each at most this many characters.
MAX_REDIRECT_URIS = 20
MAX_REDIRECT_URI_LENGTH = 2000


class RegistrationError(OAuthError):
    """A refused registration (RFC 7591 §3.2.2): HTTP 400, ``error`` is ``invalid_client_metadata``,
    ``invalid_redirect_uri`` or ``invalid_software_statement``, the description names the field."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(error, description, status=400)


def parse_body(request: HttpRequest) -> dict[str, Any]:
    """The registration request's JSON object.

    :raises OAuthError: 413 ``invalid_request`` for a body over ``DATA_UPLOAD_MAX_MEMORY_SIZE``.
    :raises RegistrationError: ``invalid_client_metadata`` for a body that is not a JSON object,
        or a member (or member name) that is not storable text (NUL, lone surrogate), naming it;
        ``invalid_redirect_uri`` when that member is ``redirect_uris``.
    """
    try:
        raw = request.body
    except RequestDataTooBig:
        raise OAuthError("invalid_request", "The request body is too large.", status=413) from None
    try:
        data = json.loads(raw or b"")
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise RegistrationError("invalid_client_metadata", "The request body must be a JSON object.") from None
    if not isinstance(data, dict):
        raise RegistrationError("invalid_client_metadata", "The request body must be a JSON object.")
    for name, value in data.items():
        if not storable(name):
            raise RegistrationError(
                "invalid_client_metadata", "Member names must be text without NUL characters or unpaired surrogates."
            )
        if not storable(value):
            if name == "redirect_uris":
                raise RegistrationError(
                    "invalid_redirect_uri", "redirect_uris must be text without NUL characters or unpaired surrogates."
                )
            raise RegistrationError(
                "invalid_client_metadata", f"{name[:100]} must be text without NUL characters or unpaired surrogates."
            )
    return data


def validate_redirect_uri(uri: Any) -> None:
    """https, or http on a loopback host; absolute, no fragment, no userinfo.

    :raises RegistrationError: ``invalid_redirect_uri`` naming the URI.
    """
    if not isinstance(uri, str) or not uri or any(ch.isspace() for ch in uri):
        raise RegistrationError("invalid_redirect_uri", "redirect_uris: each entry must be a URI without spaces.")
    if len(uri) > MAX_REDIRECT_URI_LENGTH:
        raise RegistrationError(
            "invalid_redirect_uri", f"redirect_uris: each entry must be at most {MAX_REDIRECT_URI_LENGTH} characters."
        )
    try:
        parts = urlsplit(uri)
        parts.port  # noqa: B018 - validates the port
    except ValueError:
        raise RegistrationError("invalid_redirect_uri", f"redirect_uris: {uri!r} is not a valid URI.") from None
    if "#" in uri or "@" in parts.netloc or not parts.hostname:
        raise RegistrationError(
            "invalid_redirect_uri", f"redirect_uris: {uri!r} must be absolute, without fragment or userinfo."
        )
    if parts.scheme == "https":
        return
    if parts.scheme == "http" and is_loopback_host(parts.hostname):
        return
    raise RegistrationError(
        "invalid_redirect_uri", f"redirect_uris: {uri!r} must use https, or http on a loopback host."
    )


def validate_metadata(data: dict[str, Any]) -> dict[str, Any]:
    """Check the members we act on and return the accepted metadata to store and echo.

    :raises RegistrationError: naming the offending field.
    """
    redirect_uris = data.get("redirect_uris", [])
    if not isinstance(redirect_uris, list):
        raise RegistrationError("invalid_redirect_uri", "redirect_uris must be an array of URIs.")
    if len(redirect_uris) > MAX_REDIRECT_URIS:
        raise RegistrationError("invalid_redirect_uri", f"redirect_uris: at most {MAX_REDIRECT_URIS} URIs.")
    for uri in redirect_uris:
        validate_redirect_uri(uri)
    method = data.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        raise RegistrationError(
            "invalid_client_metadata",
            f"token_endpoint_auth_method: {method!r} is not supported; use one of {', '.join(AUTH_METHODS)}.",
        )
    accepted: dict[str, Any] = {"token_endpoint_auth_method": method}
    for name in ECHOED_STRING_FIELDS:
        if name in data and data[name] is not None:
            if not isinstance(data[name], str):
                raise RegistrationError("invalid_client_metadata", f"{name} must be a string.")
            accepted[name] = data[name]
    for name in URI_FIELDS:
        if name in accepted:
            try:
                URLValidator(schemes=["https"])(accepted[name])
            except ValidationError:
                raise RegistrationError("invalid_client_metadata", f"{name} must be an https URL.") from None
    if "client_name" in accepted and has_invisible_format_characters(accepted["client_name"]):
        # Shown on the consent page: a bidi override or zero-width character can make it read as another name.
        raise RegistrationError(
            "invalid_client_metadata",
            "client_name must not contain bidirectional or zero-width formatting characters.",
        )
    for name, value in accepted.items():
        limit = MAX_LENGTHS.get(name, 2000)
        if isinstance(value, str) and len(value) > limit:
            raise RegistrationError("invalid_client_metadata", f"{name} is longer than {limit} characters.")
    if "scope" in accepted:
        accepted["scope"] = narrow_scope(accepted["scope"])
    if "contacts" in data:
        contacts = data["contacts"]
        if not isinstance(contacts, list) or not all(isinstance(c, str) for c in contacts):
            raise RegistrationError("invalid_client_metadata", "contacts must be an array of strings.")
        accepted["contacts"] = contacts
    grant_types = data.get("grant_types", ["authorization_code"])
    if not isinstance(grant_types, list) or not all(isinstance(g, str) for g in grant_types):
        raise RegistrationError("invalid_client_metadata", "grant_types must be an array of strings.")
    # RFC 7591 §2: values the server does not support are left out (e.g. the device grant
    # desktop clients list), not refused; registering needs one grant this server issues.
    supported = [g for g in dict.fromkeys(grant_types) if g in GRANT_TYPES]
    primary = [g for g in supported if g != "refresh_token"]
    if not primary:
        raise RegistrationError(
            "invalid_client_metadata",
            f"grant_types: none of {', '.join(grant_types) or '[]'} can be used here; "
            "register authorization_code (with refresh_token) or client_credentials.",
        )
    if len(primary) > 1:
        raise RegistrationError(
            "invalid_client_metadata", "grant_types: register authorization_code or client_credentials, not both."
        )
    if primary == ["client_credentials"] and method == "none":
        # OAuth 2.1 §4.2: the client credentials grant is for confidential clients; a public one
        # holds no credential, so anyone could use its client_id to obtain tokens.
        raise RegistrationError(
            "invalid_client_metadata",
            "grant_types: client_credentials needs client authentication; a public client "
            '(token_endpoint_auth_method "none") registers authorization_code.',
        )
    accepted["grant_types"] = supported
    if "response_types" in data:
        response_types = data["response_types"]
        if not isinstance(response_types, list) or not all(isinstance(r, str) for r in response_types):
            raise RegistrationError("invalid_client_metadata", "response_types must be an array of strings.")
        if primary == ["authorization_code"] and "code" not in response_types:
            raise RegistrationError(
                "invalid_client_metadata", 'response_types: the authorization_code grant needs ["code"].'
            )
        accepted["response_types"] = ["code"] if "code" in response_types else []
    check_application_type(data, accepted, redirect_uris)
    check_software_statement(data)
    accepted.update(dpop_registration_metadata(data))  # RFC 9449 §5.2
    return accepted


def narrow_scope(requested: str) -> str:
    """The requested ``scope`` narrowed to the scopes this server serves, in the requested order,
    each once (RFC 7591 §2, §3.2.1: the server may register a subset of the requested metadata and
    returns what it registered). Real clients ask for ``openid``, ``offline_access`` or scopes of
    other servers; they register with the rest. An empty ``scope`` stays empty. Scopes are
    separated by spaces (RFC 6749 §3.3, ``scope-token *( SP scope-token )``): a tab or another
    kind of space makes one token, which no scope here matches.

    :raises RegistrationError: ``invalid_client_metadata`` naming ``scope`` when scopes were
        requested and none of them is served here.
    """
    asked = list(dict.fromkeys(name for name in requested.split(" ") if name))  # RFC 6749 §3.3: SP only
    served = get_scopes_backend().get_all_scopes()
    kept = [name for name in asked if name in served]
    if asked and not kept:
        raise RegistrationError(
            "invalid_client_metadata",
            f"scope: none of the requested scopes ({' '.join(asked)[:500]}) is served here; "
            f"supported: {' '.join(sorted(served))}.",
        )
    return " ".join(kept)


#: RFC 8252 §7.3 / OpenID Connect Registration ``application_type`` values.
APPLICATION_TYPES = ("native", "web")


def check_application_type(data: dict[str, Any], accepted: dict[str, Any], redirect_uris: list) -> None:
    """``application_type`` (MCP 2026-07-28 registration; OpenID Connect Registration §2).

    ``native`` (desktop, CLI: RFC 8252) may only use loopback ``http`` redirect URIs (any port,
    RFC 8252 §7.3); private-use URI schemes are not offered by this server. ``web`` may only
    use ``https`` redirect URIs. Without ``application_type`` the redirect URIs alone are checked
    (https, or http on a loopback host) and nothing is echoed.

    :raises RegistrationError: ``invalid_client_metadata`` for another value,
        ``invalid_redirect_uri`` for a redirect URI the type may not use (naming both).
    """
    if "application_type" not in data or data["application_type"] is None:
        return
    kind = data["application_type"]
    if kind not in APPLICATION_TYPES:
        raise RegistrationError("invalid_client_metadata", "application_type must be native or web.")
    for uri in redirect_uris:
        scheme = urlsplit(uri).scheme
        if kind == "web" and scheme != "https":
            raise RegistrationError(
                "invalid_redirect_uri",
                f"redirect_uris: {uri!r} is not https; application_type web may only use https redirect URIs.",
            )
        if kind == "native" and scheme != "http":
            raise RegistrationError(
                "invalid_redirect_uri",
                f"redirect_uris: {uri!r} is not a loopback redirect; application_type native may only use "
                "http://127.0.0.1, http://[::1] or http://localhost redirect URIs (RFC 8252 §7.3).",
            )
    accepted["application_type"] = kind


def check_software_statement(data: dict[str, Any]) -> None:
    """RFC 7591 §2.3: this server trusts no software-statement issuer, so a well-formed statement is
    ignored; one that is not a compact JWS (three base64url parts) is refused.

    :raises RegistrationError: ``invalid_software_statement``.
    """
    if "software_statement" not in data:
        return
    statement = data["software_statement"]
    parts = statement.split(".") if isinstance(statement, str) else []
    alphabet = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    if (
        len(parts) != 3
        or not all(part and set(part) <= alphabet for part in parts[:2])
        or not set(parts[2]) <= alphabet
    ):
        raise RegistrationError(
            "invalid_software_statement", "software_statement must be a signed JWT (RFC 7591 §2.3)."
        )


def dot_document(data: dict[str, Any], accepted: dict[str, Any]) -> bytes:
    """The registration request as DOT's view reads it: the accepted grant types only."""
    document = {key: value for key, value in data.items() if key not in ("grant_types", "response_types")}
    document["grant_types"] = accepted["grant_types"]
    if accepted.get("response_types"):
        document["response_types"] = accepted["response_types"]
    return json.dumps(document).encode()


#: The refusal of an anonymous confidential registration (see :class:`AnonymousPublicClientPermission`).
ANONYMOUS_CONFIDENTIAL = RegistrationError(
    "invalid_client_metadata",
    'token_endpoint_auth_method: anonymous registration is open to public clients only ("none"); '
    "a confidential client is pre-registered by the site's administrators or registered by a logged-in user.",
)


class AnonymousPublicClientPermission:
    """DCR permission: anyone may register a public client (``token_endpoint_auth_method: none``).

    Confidential registrations need a logged-in user (DOT's ``IsAuthenticatedDCRPermission``)
    unless ``MCP_OAUTH["DCR_ALLOW_ANONYMOUS_CONFIDENTIAL"]`` is true.
    """

    def has_permission(self, request: HttpRequest) -> bool:
        try:
            data = parse_body(request)
        except RegistrationError:
            return True  # the view answers invalid_client_metadata
        if data.get("token_endpoint_auth_method") == "none":
            return True
        if mcp_oauth_settings.DCR_ALLOW_ANONYMOUS_CONFIDENTIAL:
            return True
        return IsAuthenticatedDCRPermission().has_permission(request)


@method_decorator(csrf_exempt, name="dispatch")  # as DOT's view (its session case is checked by its permission)
@method_decorator(login_not_required, name="dispatch")
class MCPRegistrationView(OAuthErrorMixin, DynamicClientRegistrationView):
    """``POST /oauth/register`` (RFC 7591 §3); see the module docstring."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        """Register a client (RFC 7591 §3.1) or answer 400 naming the field (§3.2.2).

        :raises OAuthError: rendered by :class:`~mcp_oauth.errors.OAuthErrorMixin`: 429 ``slow_down``
            (throttled), 400 ``invalid_client_metadata`` / ``invalid_redirect_uri`` /
            ``invalid_software_statement`` (metadata, trust policy, anonymous confidential client).
        """
        throttling.enforce(request, "register")
        data = parse_body(request)
        accepted = validate_metadata(data)
        for permission_class in oauth2_settings.DCR_REGISTRATION_PERMISSION_CLASSES or ():
            permission = permission_class()
            if not permission.has_permission(request):
                if getattr(permission, "denial", None):  # the trust policy refused the redirect URIs
                    raise RegistrationError(
                        "invalid_redirect_uri",
                        "redirect_uris: this server's client policy does not accept this registration; "
                        "ask the site's administrators to allow it.",
                    )
                raise ANONYMOUS_CONFIDENTIAL
        enforce_identical_budget(request, {**data, **accepted})
        request._body = dot_document(data, accepted)
        with transaction.atomic():
            response = super().post(request, *args, **kwargs)
            if response.status_code != 201:
                raise as_oauth_error(response)
            body = json.loads(response.content)
            application = get_application_model().objects.get(client_id=body["client_id"])
            profile = ClientProfile.objects.create(
                application=application,
                metadata=accepted,
                client_uri=accepted.get("client_uri", ""),
                logo_uri=accepted.get("logo_uri", ""),
            )
        verdict = mcp_oauth_settings.adapter.trust_verdict(application)
        record(
            AuditEvent.Kind.CLIENT_REGISTERED,
            request=request,
            client_id=application.client_id,
            detail={
                "client_name": application.name,
                "client_type": application.client_type,
                "token_endpoint_auth_method": accepted.get("token_endpoint_auth_method"),
                **verdict.as_detail(),
            },
        )
        body.update(accepted)
        body["client_id_issued_at"] = int(application.created.timestamp())
        body["registration_client_uri"] = registration_client_uri(application)
        if "client_secret" in body:
            body["client_secret_expires_at"] = profile.client_secret_expires_at
        result = JsonResponse(body, status=201)
        result["Cache-Control"] = "no-store"
        result["Pragma"] = "no-cache"
        return result


def registration_client_uri(application) -> str:
    """RFC 7592 §3 client configuration URL, built from ``BASE_URL`` (never the Host header)."""
    return mcp_oauth_settings.absolute(
        reverse("oauth2_provider:dcr-register-management", kwargs={"client_id": application.client_id})
    )


def as_oauth_error(response: HttpResponse) -> OAuthError:
    """DOT's own JSON error answer as an :class:`~mcp_oauth.errors.OAuthError`, so the one renderer
    adds what DOT leaves out (``WWW-Authenticate`` on its 401s, RFC 6750 §3; ``no-store``)."""
    try:
        body = json.loads(response.content or b"{}")
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    return OAuthError(
        body.get("error") or "invalid_request", str(body.get("error_description") or ""), status=response.status_code
    )


@method_decorator(csrf_exempt, name="dispatch")
@method_decorator(login_not_required, name="dispatch")
class MCPRegistrationManagementView(OAuthErrorMixin, DynamicClientRegistrationManagementView):
    """RFC 7592 client configuration endpoint (GET/PUT/DELETE ``/oauth/register/<client_id>``).

    A PUT goes through the same checks as a registration (:func:`validate_metadata`: https or
    loopback redirect URIs, supported grant types and auth methods, no NUL, lengths), so a
    client cannot rewrite itself into something registration refuses. Answers carry the same
    complete metadata as registration (RFC 7591 §3.2.1) and ``Cache-Control: no-store``; a
    missing or invalid registration access token gets 401 ``invalid_token`` with its Bearer
    challenge (RFC 7592 §3, RFC 6750 §3).
    """

    def dispatch(self, request: HttpRequest, *args, **kwargs) -> HttpResponseBase:
        response = super().dispatch(request, *args, **kwargs)
        if (
            isinstance(response, HttpResponse)  # DOT's answers are JSON (never streamed)
            and response.status_code >= 400
            and response.get("Content-Type", "").startswith("application/json")
            and "WWW-Authenticate" not in response
        ):
            return as_oauth_error(response).response()
        if response.status_code >= 400:  # DOT's own 401 challenges too (RFC 6749 §5.1, RFC 6750 §3)
            response["Cache-Control"] = "no-store"
            response["Pragma"] = "no-cache"
        return response

    def _complete(self, response: HttpResponse, accepted: dict[str, Any] | None = None) -> HttpResponse:
        if response.status_code == 200 and response.get("Content-Type", "").startswith("application/json"):
            body = json.loads(response.content)
            application = get_application_model().objects.filter(client_id=body.get("client_id")).first()
            if application is not None:
                profile, _ = ClientProfile.objects.get_or_create(application=application)
                if accepted is not None:
                    profile.metadata = accepted
                    profile.client_uri = accepted.get("client_uri", "")
                    profile.logo_uri = accepted.get("logo_uri", "")
                    profile.save(update_fields=["metadata", "client_uri", "logo_uri"])
                body.update(profile.metadata)
                body["client_id_issued_at"] = int(application.created.timestamp())
                body["registration_client_uri"] = registration_client_uri(application)
                response = JsonResponse(body, status=200)
        response["Cache-Control"] = "no-store"
        response["Pragma"] = "no-cache"
        return response

    def get(self, request: HttpRequest, client_id: str, *args, **kwargs) -> HttpResponse:
        return self._complete(super().get(request, client_id, *args, **kwargs))

    def put(self, request: HttpRequest, client_id: str, *args, **kwargs) -> HttpResponse:
        """RFC 7592 §2.2 update; refusals as :meth:`MCPRegistrationView.post` (400 naming the field),
        and 400 ``invalid_client_metadata`` when the body's ``client_id`` is not the URL's."""
        data = parse_body(request)
        accepted = validate_metadata(data)
        # The trust policy applies to the new redirect URIs as to a registration,
        # once the registration access token is verified (DOT checks it again below).
        authenticated = self._authenticate_registration_request(request, client_id)
        if isinstance(authenticated, HttpResponse):
            return authenticated
        if "client_id" in data and data["client_id"] != client_id:
            # RFC 7592 §2.2: the request's client_id MUST be the one currently issued.
            raise RegistrationError("invalid_client_metadata", "client_id must be the client's own client_id.")
        verdict = trust.evaluate(
            client_id=client_id,
            redirect_uris=data.get("redirect_uris") or [],
            registration_source=authenticated.application.registration_source,
        )
        if verdict.decision == trust.DENIED:
            trust.record_denial(verdict, request=request, client_id=client_id, stage="registration update")
            raise RegistrationError(
                "invalid_redirect_uri",
                "redirect_uris: this server's client policy does not accept these redirect URIs.",
            )
        if accepted["token_endpoint_auth_method"] != "none" and not mcp_oauth_settings.DCR_ALLOW_ANONYMOUS_CONFIDENTIAL:
            if authenticated.application.client_type != "confidential":
                raise RegistrationError(
                    "invalid_client_metadata",
                    "token_endpoint_auth_method: a public client cannot become confidential.",
                )
        request._body = dot_document(data, accepted)
        with transaction.atomic():
            return self._complete(super().put(request, client_id, *args, **kwargs), accepted)

    def delete(self, request: HttpRequest, client_id: str, *args, **kwargs) -> HttpResponse:
        response = super().delete(request, client_id, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response
