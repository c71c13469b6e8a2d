"""The attributes of an OAuth endpoint's span, read from its request and response (no I/O).

Never a secret, a code, a token or an assertion: of the form only the grant type's value and the
*names* of the client-authentication parameters sent are used (the ``Authorization`` header only
for its scheme), and of a refusal only its ``error`` member (JSON body, RFC 6749 §5.2, RFC 7591
§3.2.2) or the ``error`` parameter of an authorization redirect (RFC 6749 §4.1.2.1). The bytes
kept to read them (at most :data:`BODY_LIMIT` each way) live as long as the request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qs, urlsplit

__all__ = ["BODY_LIMIT", "Exchange"]

#: At most this many bytes of a request form or an error body are kept to be read.
BODY_LIMIT = 16_384
_ERROR_CODE = re.compile(r"^[a-z_]{1,64}$")
_GRANT_TYPE = re.compile(r"^[A-Za-z0-9_.:/-]{1,200}$")
_CLIENT_AUTH_ENDPOINTS = frozenset({"token", "revoke", "introspect"})


@dataclass(slots=True)
class Exchange:
    """What the span of one OAuth endpoint request is made of."""

    endpoint: str
    method: str
    route: str
    authorization_scheme: str = ""
    request_form: bool = False
    request_body: bytes = b""
    status: int | None = None
    response_json: bool = False
    location: str = ""
    response_body: bytes = b""
    carrier: dict[str, str] = field(default_factory=dict)

    def take_request_header(self, name: bytes, value: bytes) -> None:
        if name == b"traceparent" or name == b"tracestate":
            self.carrier[name.decode("latin-1")] = value.decode("latin-1")
        elif name == b"authorization":
            self.authorization_scheme = value.split(b" ", 1)[0].decode("latin-1").lower()
        elif name == b"content-type":
            self.request_form = value.split(b";", 1)[0].strip().lower() == b"application/x-www-form-urlencoded"

    def take_response_start(self, status: int, headers: Iterable[tuple[bytes, bytes]]) -> None:
        self.status = status
        for name, value in headers:
            lowered = name.lower()
            if lowered == b"content-type":
                self.response_json = b"json" in value.lower()
            elif lowered == b"location" and self.endpoint == "authorize":
                self.location = value.decode("latin-1")

    def keeps_response_body(self) -> bool:
        return (
            self.status is not None
            and self.status >= 400
            and self.response_json
            and len(self.response_body) < BODY_LIMIT
        )

    def request_attributes(self) -> dict[str, str]:
        """``oauth.grant_type`` (token endpoint) and ``oauth.client_auth_method``."""
        attributes: dict[str, str] = {}
        form = self._form()
        if self.endpoint == "token":
            grant_type = form.get("grant_type", [""])[0]
            if _GRANT_TYPE.match(grant_type):
                attributes["oauth.grant_type"] = grant_type
        if self.endpoint in _CLIENT_AUTH_ENDPOINTS:
            if self.authorization_scheme == "basic":
                attributes["oauth.client_auth_method"] = "client_secret_basic"
            elif "client_assertion" in form:
                attributes["oauth.client_auth_method"] = "private_key_jwt"
            elif "client_secret" in form:
                attributes["oauth.client_auth_method"] = "client_secret_post"
            elif "client_id" in form:
                attributes["oauth.client_auth_method"] = "none"
        return attributes

    def error_code(self) -> str | None:
        """The OAuth error code of the response, if it is a refusal that names one."""
        if self.endpoint == "authorize" and self.location:
            query = urlsplit(self.location).query
            if "error=" not in query:
                return None
            code = parse_qs(query).get("error", [""])[0]
            return code if _ERROR_CODE.match(code) else None
        if not self.response_body:
            return None
        try:
            document = json.loads(self.response_body)
        except ValueError:
            return None
        named = document.get("error") if isinstance(document, dict) else None
        return named if isinstance(named, str) and _ERROR_CODE.match(named) else None

    def _form(self) -> dict[str, list[str]]:
        if not self.request_form or not self.request_body:
            return {}
        try:
            return parse_qs(self.request_body.decode("utf-8", "replace"), keep_blank_values=True)
        except ValueError:
            return {}
