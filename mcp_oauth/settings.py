"""The ``MCP_OAUTH`` settings namespace, in the style of DRF's ``api_settings``.

A site configures the app with one dict in its Django settings::

    MCP_OAUTH = {
        "BASE_URL": "https://mcp.example.com",
    }

Every key is optional except ``BASE_URL``; a missing key falls back to
:data:`DEFAULTS` (kept, with what each key means, in :mod:`mcp_oauth.defaults` and
re-exported here). Values are read through :data:`mcp_oauth_settings`, which
reloads itself when a test changes ``MCP_OAUTH`` with ``override_settings``.

Besides its own keys, the app makes django-oauth-toolkit (DOT) secure by
default: :data:`DOT_SECURE_DEFAULTS` replaces DOT's own defaults for the keys it
names, so a key that the site sets in ``OAUTH2_PROVIDER`` still wins (and
``manage.py check`` warns when it weakens a default, see :mod:`mcp_oauth.checks`).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.utils.module_loading import import_string
from oauth2_provider import settings as dot_settings

from mcp_oauth.defaults import DEFAULTS, IMPORT_STRINGS

__all__ = [
    "CLIENT_SECRET_HASHER_PATH",
    "CLIENT_SECRET_HASHER_PATHS",
    "DEFAULTS",
    "DOT_SECURE_DEFAULTS",
    "DOT_SECURITY_KEYS",
    "IMPORT_STRINGS",
    "AppSettings",
    "MCPOAuthSettings",
    "apply_dot_defaults",
    "client_secret_hasher_listed",
    "mcp_oauth_settings",
]

#: DOT settings the app turns on unless the site sets them itself in
#: ``OAUTH2_PROVIDER``. Values that depend on MCP_OAUTH (the issuer) are added by
#: :func:`apply_dot_defaults`.
DOT_SECURE_DEFAULTS: dict[str, Any] = {
    "OAUTH2_VALIDATOR_CLASS": "mcp_oauth.authorization_server.validator.MCPOAuth2Validator",
    "OAUTH2_SERVER_CLASS": "mcp_oauth.authorization_server.server.MCPServer",
    # A refresh token unused for 30 days expires (rotation renews it): RFC 9700 §4.14.2.
    "REFRESH_TOKEN_EXPIRE_SECONDS": 30 * 24 * 3600,
    "SCOPES": {"mcp": "Use this site's MCP tools on your behalf"},
    # The site's SCOPES plus offline_access while refresh tokens are issued (mcp_oauth.shared.scopes).
    "SCOPES_BACKEND_CLASS": "mcp_oauth.shared.scopes.MCPScopes",
    "DEFAULT_SCOPES": ["__all__"],
    "PKCE_REQUIRED": True,
    "ACCESS_TOKEN_EXPIRE_SECONDS": 3600,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 60,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "REQUEST_APPROVAL_PROMPT": "force",
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "ALLOWED_REDIRECT_URI_SCHEMES": ["http", "https"],
    "ALLOW_URI_WILDCARDS": False,
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "COMPLIANT_BCP_RFC9700_REFRESH_TOKEN": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_SCHEME": True,
    "COMPLIANT_BCP_RFC9700_REDIRECT_URI_MATCHING": True,
    "COMPLIANT_BCP_RFC9700_PKCE_REQUIRED": True,
    # Client secrets: a keyed SHA-256 suited to high-entropy machine secrets (mcp_oauth.authorization_server.client_auth.client_secrets),
    # not a password-stretching hash. Django finds hashers through PASSWORD_HASHERS only, so this
    # default applies while "mcp_oauth.authorization_server.client_auth.client_secrets.ClientSecretHasher" is listed there; a site
    # that does not list it keeps DOT's default (its password hasher) and `check --deploy` says so
    # (mcp_oauth.W051; apply_dot_defaults).
    "CLIENT_SECRET_HASHER": "mcp_oauth_sha256",
    # Client ID Metadata Documents: on, fetched by the SSRF-safe fetcher, 5 KB cap (CIMD draft §6.6).
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "mcp_oauth.authorization_server.cimd.fetcher.SafeMetadataFetcher",
    "CIMD_MAX_DOCUMENT_SIZE": 5 * 1024,
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": (
        "mcp_oauth.authorization_server.client_registry.trust.TrustPolicyDCRPermission",  # the trust policy (TrustRule, TRUST_MODE)
        "mcp_oauth.authorization_server.client_registry.registration.AnonymousPublicClientPermission",
    ),
    # The trust policy decides which client_id hosts may be fetched and registered.
    "CIMD_REGISTRATION_PERMISSION_CLASSES": (
        "mcp_oauth.authorization_server.client_registry.trust.TrustPolicyCIMDPermission",
    ),
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
    "OIDC_RESPONSE_TYPES_SUPPORTED": ["code"],
}

#: The DOT keys whose weakening ``manage.py check`` reports, with the secure value.
DOT_SECURITY_KEYS: dict[str, Any] = {
    key: value
    for key, value in DOT_SECURE_DEFAULTS.items()
    if key.startswith("COMPLIANT_BCP_RFC9700_")
    or key
    in {
        "PKCE_REQUIRED",
        "REFRESH_TOKEN_REUSE_PROTECTION",
        "ROTATE_REFRESH_TOKEN",
        "ALLOW_URI_WILDCARDS",
        "OAUTH2_VALIDATOR_CLASS",
    }
}


class AppSettings:
    """Attribute access to one settings dict (``settings.<setting_name>``) with ``defaults`` behind it,
    in the style of DRF's ``api_settings``; other apps of the project reuse it for their namespace.

    Raises :class:`AttributeError` for a key that is not in ``defaults``; a key named in
    ``import_strings`` holding a dotted path is imported on first access and the object is
    kept (:class:`ImportError` when it does not import). Call :meth:`reload`
    when the setting changes (a ``setting_changed`` receiver does it for the project's apps).
    """

    def __init__(
        self, setting_name: str, defaults: dict[str, Any], import_strings: frozenset[str] = frozenset()
    ) -> None:
        self.setting_name = setting_name
        self.defaults = defaults
        self.import_strings = import_strings
        self._cached: set[str] = set()

    @property
    def user_settings(self) -> dict[str, Any]:
        if not hasattr(self, "_user_settings"):
            self._user_settings = getattr(settings, self.setting_name, {}) or {}
        return self._user_settings

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("_") or attr not in self.defaults:
            raise AttributeError(f"Invalid {self.setting_name} setting: {attr!r}")
        value = self.user_settings.get(attr, self.defaults[attr])
        if attr in self.import_strings and isinstance(value, str):
            # Resolved once (until reload): no import_string() on the request path.
            try:
                value = import_string(value)
            except ImportError as exc:
                raise ImportError(f"Could not import {value!r} for {self.setting_name}[{attr!r}]: {exc}") from exc
        self._cached.add(attr)
        setattr(self, attr, value)
        return value

    def plug_default(self, attr: str, value: Any) -> None:
        """Make ``value`` the default of ``attr``, for this settings object only: how another
        installed app supplies a part from its ``AppConfig.ready()`` (the elicitation app's
        cipher for ``TASKS_RESULT_CIPHER``) without this app naming it. The site's own value,
        when it sets one, still wins; the plugged default survives :meth:`reload`.

        :raises AttributeError: ``attr`` is not a setting of this namespace.
        """
        if attr not in self.defaults:
            raise AttributeError(f"Invalid {self.setting_name} setting: {attr!r}")
        self.defaults = {**self.defaults, attr: value}
        if attr in vars(self):
            delattr(self, attr)
        self._cached.discard(attr)

    def configured(self, attr: str) -> Any:
        """The value of ``attr`` as configured (the site's or the default), a dotted path not imported:
        for messages that must name what the site wrote."""
        if attr not in self.defaults:
            raise AttributeError(f"Invalid {self.setting_name} setting: {attr!r}")
        return self.user_settings.get(attr, self.defaults[attr])

    def reload(self) -> None:
        # Every cached key, also one a concurrent reader (a live server's thread) set after the
        # last reload without being recorded in _cached yet.
        for attr in [name for name in vars(self) if name in self.defaults]:
            delattr(self, attr)
        self._cached.clear()
        if hasattr(self, "_user_settings"):
            delattr(self, "_user_settings")


class MCPOAuthSettings(AppSettings):
    """``settings.MCP_OAUTH`` with :data:`DEFAULTS` behind it, plus derived values (``base_url``, ``issuer``)."""

    def __init__(self, defaults: dict[str, Any] | None = None) -> None:
        super().__init__("MCP_OAUTH", defaults or DEFAULTS, IMPORT_STRINGS)

    def reload(self) -> None:
        super().reload()
        self.__dict__.pop("_adapter", None)

    # Derived values -------------------------------------------------------

    @property
    def adapter(self) -> Any:
        """The one instance of the ``ADAPTER`` class (:func:`mcp_oauth.adapter.get_adapter`), made on
        first use and again only after ``MCP_OAUTH`` changes. ``ADAPTER = None``: the default class.

        :raises ImportError: ``ADAPTER`` does not import (``manage.py check``: ``mcp_oauth.E042``).
        """
        instance = self.__dict__.get("_adapter")
        if instance is None:
            cls = self.ADAPTER or import_string(self.defaults["ADAPTER"])
            instance = self.__dict__["_adapter"] = cls()
        return instance

    @property
    def base_url(self) -> str:
        """``BASE_URL`` without a trailing slash.

        Raises :class:`django.core.exceptions.ImproperlyConfigured` when unset.
        """
        if not self.BASE_URL:
            raise ImproperlyConfigured('MCP_OAUTH["BASE_URL"] must be set, e.g. "https://mcp.example.com".')
        return str(self.BASE_URL).rstrip("/")

    @property
    def issuer(self) -> str:
        """The RFC 8414 ``issuer``: ``ISSUER`` or ``BASE_URL``, never with a trailing slash."""
        return str(self.ISSUER or self.base_url).rstrip("/")

    @property
    def issuer_path(self) -> str:
        """Path component of the issuer without slashes ("" for an origin-only issuer)."""
        return urlsplit(self.issuer).path.strip("/")

    def absolute(self, path: str) -> str:
        """``BASE_URL`` + ``path`` (``path`` starts with "/")."""
        return self.base_url + path


mcp_oauth_settings = MCPOAuthSettings()


#: The fast client-secret hasher (:mod:`mcp_oauth.authorization_server.client_auth.client_secrets`), as listed in ``PASSWORD_HASHERS``.
CLIENT_SECRET_HASHER_PATH = "mcp_oauth.authorization_server.client_auth.client_secrets.ClientSecretHasher"

#: Every path of that hasher a site's ``PASSWORD_HASHERS`` may hold: the current one and the
#: deprecated alias module at the old place (until 1.0). The old
#: path is written in two pieces so that ``scripts/house_moves.py`` leaves it as it is.
CLIENT_SECRET_HASHER_PATHS = (
    CLIENT_SECRET_HASHER_PATH,
    "mcp_oauth.authorization_server" + ".client_secrets.ClientSecretHasher",
)


def client_secret_hasher_listed(hashers: Any = None) -> bool:
    """Whether the fast client-secret hasher is in ``hashers`` (default ``settings.PASSWORD_HASHERS``), by any of its paths."""
    listed = settings.PASSWORD_HASHERS if hashers is None else hashers
    return any(path in listed for path in CLIENT_SECRET_HASHER_PATHS)


def apply_dot_defaults() -> None:
    """Install :data:`DOT_SECURE_DEFAULTS` (plus the issuer) as DOT's defaults.

    DOT reads a key from ``OAUTH2_PROVIDER`` first and falls back to its
    ``DEFAULTS`` dict; replacing entries of that dict makes our values the
    defaults while leaving every key the site sets itself in its hands.
    """
    dot_settings.DEFAULTS.update(DOT_SECURE_DEFAULTS)
    if not client_secret_hasher_listed():
        # Django could neither store nor recognise such hashes: keep DOT's own default.
        dot_settings.DEFAULTS["CLIENT_SECRET_HASHER"] = "default"
    if mcp_oauth_settings.BASE_URL:
        dot_settings.DEFAULTS["OIDC_ISS_ENDPOINT"] = mcp_oauth_settings.issuer
    dot_settings.oauth2_settings.reload()


def _reload(*, setting: str, **kwargs: Any) -> None:
    # DOT's view classes keep oauthlib servers built with the old values: the app's start-up
    # wiring (mcp_oauth.wiring) drops them on the same signal.
    if setting == "MCP_OAUTH":
        mcp_oauth_settings.reload()
        apply_dot_defaults()
    elif setting == "PASSWORD_HASHERS":
        apply_dot_defaults()
    elif setting == "OAUTH2_PROVIDER":
        dot_settings.oauth2_settings.reload()


setting_changed.connect(_reload)
