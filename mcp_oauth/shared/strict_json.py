"""The one strict JSON reader for what the servers verify: JWS headers and JWT claims (client
assertions, ID-JAGs, DPoP proofs), JWK Sets and client metadata documents.

Python's :func:`json.loads` accepts what RFC 8259 does not: ``NaN``, ``Infinity`` and
``-Infinity`` (§6), numbers that overflow to infinity (``1e400``), repeated member names (the last
one wins silently; §4 says names SHOULD be unique, and RFC 7515 §5.2 step 4 / RFC 7519 §4 /
RFC 8725 §3.9 require a JWS or JWT with duplicate names to be refused or its last value used
consistently: refusing is the only choice that no second parser can read differently). A
``NaN`` date passes every comparison (``nan < now`` and ``nan > now`` are both false), so a DPoP
proof or ID-JAG with ``"iat": NaN`` would never be too old (RFC 9449 §11.1); a NUL character in a
claim that reaches a query is a database error on PostgreSQL (a 500).

:func:`loads` reads strict JSON: UTF-8 without a byte order mark (RFC 8259 §8.1), no
non-finite number, no duplicate member name (unless ``unique=False``).

:func:`jose_object` reads one base64url segment of a compact JWS (RFC 7515 §3.1, §2: base64url
without padding) and checks the JSON object inside with :func:`check_jose_members`:

* every string, anywhere, is storable text (no NUL, no unpaired surrogate; RFC 8259 §8.2) and at
  most :data:`MAX_STRING_LENGTH` characters;
* the identifier members of :data:`IDENTIFIER_LIMITS` (``iss``, ``sub``, ``aud``, ``jti``,
  ``email``, ``htu``, ``htm``, ``client_id``, ``resource``, ``kid``, ...), when present, are strings
  (``aud`` and ``scope`` may be arrays of strings; RFC 7519 §4.1.3) without control characters
  (C0, DEL, C1) and no longer than their limit;
* the numeric dates of :data:`NUMERIC_DATES` (``exp``, ``iat``, ``nbf``, ``auth_time``), when
  present, are JSON numbers (never ``true``/``false``), finite, and ``0 <= value <``
  :data:`MAX_NUMERIC_DATE` (year 10000; RFC 7519 §2 NumericDate).

Every refusal is a :class:`StrictJSONError` (a :class:`ValueError`) whose message is safe to send
as an ``error_description``; the caller names the OAuth error (``invalid_client``,
``invalid_grant``, ``invalid_dpop_proof``).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from typing import Any

__all__ = [
    "IDENTIFIER_LIMITS",
    "MAX_NUMERIC_DATE",
    "MAX_STRING_LENGTH",
    "NUMERIC_DATES",
    "StrictJSONError",
    "b64url_decode",
    "check_jose_members",
    "check_values",
    "finite_float",
    "jose_object",
    "loads",
    "numeric_date",
    "reject_constant",
    "unique_members",
]

#: 10000-01-01T00:00:00Z in seconds since the epoch: no sane date is this late (and below 2**53,
#: so every integer under it is exact as a float).
MAX_NUMERIC_DATE = 253_402_300_800
#: The JWT claims that are NumericDate values (RFC 7519 §4.1.4-§4.1.6, OIDC Core §2 ``auth_time``).
NUMERIC_DATES = ("exp", "iat", "nbf", "auth_time")
#: Longest string accepted anywhere in a JWS header, JWT claims set or JWK (characters); an
#: ``x5c`` certificate of a real identity provider is about 1,500.
MAX_STRING_LENGTH = 16_384
#: Members that name something (and may reach a query, a log line or a comparison): their
#: longest accepted value (characters). They hold no control character.
IDENTIFIER_LIMITS: dict[str, int] = {
    "iss": 2048,
    "sub": 255,  # OIDC Core §2: at most 255 ASCII characters
    "aud": 2048,
    "jti": 256,
    "email": 320,  # RFC 5321 §4.5.3.1: 64 + "@" + 255
    "client_id": 2048,
    "resource": 2048,
    "scope": 4096,
    "htm": 32,
    "htu": 2048,
    "ath": 128,
    "nonce": 1024,
    "kid": 255,
    "alg": 32,
    "typ": 128,
    "kty": 16,
    "use": 16,
    "crv": 16,
}
#: Identifier members that may also be an array of strings (RFC 7519 §4.1.3 ``aud``; ``scope`` as
#: some identity providers send it).
_ARRAY_ALLOWED = frozenset({"aud", "scope"})
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
#: What no database stores and no encoder accepts (:func:`mcp_oauth.shared.text.storable`).
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_SCALARS = frozenset({int, bool, float, type(None)})
_B64URL = re.compile(r"[A-Za-z0-9_-]*")


class _NotJSON(ValueError):
    """Raised by the parser hooks; its message names the problem."""


class StrictJSONError(ValueError):
    """Refused JSON. ``str()`` is safe to send to the client; ``reason`` is a stable code for the
    audit log: ``json`` (not strict JSON), ``base64`` or the name of the refused member."""

    def __init__(self, message: str, reason: str = "json") -> None:
        super().__init__(message)
        self.reason = reason


def reject_constant(name: str) -> Any:
    """``parse_constant`` hook: ``NaN``, ``Infinity`` and ``-Infinity`` are not JSON (RFC 8259 §6)."""
    raise _NotJSON(f"{name} is not valid JSON")


def finite_float(text: str) -> float:
    """``parse_float`` hook: a number that overflows a double (``1e400``) is refused, not infinity."""
    value = float(text)
    if not math.isfinite(value):
        raise _NotJSON("a number is out of range")
    return value


def unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``object_pairs_hook``: a member name given twice is refused (RFC 8259 §4, RFC 7515 §5.2)."""
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _NotJSON(f"duplicate member {key[:40]!r}")
        result[key] = value
    return result


def loads(data: bytes | str, *, unique: bool = True) -> Any:
    """Strict JSON: UTF-8 without a BOM, no ``NaN``/``Infinity``/overflowing number, no duplicate
    member name (when ``unique``).

    :raises StrictJSONError: ``json``: anything else (bad UTF-8, syntax, nesting beyond the
        recursion limit, an integer beyond Python's digit limit included).
    """
    try:
        text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else data
        if text.startswith("\ufeff"):
            raise _NotJSON("a byte order mark")
        return json.loads(
            text,
            object_pairs_hook=unique_members if unique else None,
            parse_constant=reject_constant,
            parse_float=finite_float,
        )
    except _NotJSON as exc:
        raise StrictJSONError(f"not strict JSON: {exc}") from None
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise StrictJSONError("not UTF-8 JSON") from None


def b64url_decode(segment: str) -> bytes:
    """A base64url segment without padding (RFC 7515 §2, Appendix C).

    :raises StrictJSONError: ``base64``: padding, characters outside the alphabet, bad length.
    """
    if not isinstance(segment, str) or not _B64URL.fullmatch(segment) or len(segment) % 4 == 1:
        raise StrictJSONError("not base64url", "base64")
    try:
        return base64.urlsafe_b64decode(segment + "=" * (-len(segment) % 4))
    except (binascii.Error, ValueError):
        raise StrictJSONError("not base64url", "base64") from None


def check_values(value: Any, *, max_length: int = MAX_STRING_LENGTH) -> None:
    """Every string (member names included) in ``value`` is storable text (no NUL, no unpaired
    surrogate; :func:`mcp_oauth.shared.text.storable`) of at most ``max_length`` characters, and
    every number is finite (a value read from elsewhere than :func:`loads`, e.g. a ``JSONField``,
    may hold ``NaN``).

    :raises StrictJSONError: ``text`` or ``number``.
    """
    try:
        _check(value, max_length)
    except RecursionError:
        raise StrictJSONError("the value is nested too deeply", "json") from None


def _check(value: Any, max_length: int) -> None:
    kind = type(value)
    if kind is str:
        if len(value) > max_length:
            raise StrictJSONError(f"a string is longer than {max_length} characters", "text")
        if _UNSTORABLE.search(value):
            raise StrictJSONError("a string holds a NUL character or an unpaired surrogate", "text")
    elif kind is dict:
        for key, item in value.items():
            _check(key, max_length)
            _check(item, max_length)
    elif kind is list or kind is tuple:
        for item in value:
            _check(item, max_length)
    elif kind is float and not math.isfinite(value):
        raise StrictJSONError("a number is not finite", "number")
    elif kind not in _SCALARS and not isinstance(value, str | dict | list | tuple | int | float):
        raise StrictJSONError("a value is not JSON", "json")


def numeric_date(members: dict[str, Any], name: str) -> int | float | None:
    """The NumericDate ``members[name]`` (RFC 7519 §2), None when absent.

    :raises StrictJSONError: ``name``: not a JSON number (``true`` included), not finite, negative
        or not before :data:`MAX_NUMERIC_DATE`.
    """
    if name not in members:
        return None
    value = members[name]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise StrictJSONError(f"the {name} claim must be a number of seconds", name)
    if not (math.isfinite(value) and 0 <= value < MAX_NUMERIC_DATE):
        raise StrictJSONError(f"the {name} claim is not a date between 1970 and 9999", name)
    return value


def _identifier(name: str, value: Any, limit: int) -> None:
    values = value if isinstance(value, list) and name in _ARRAY_ALLOWED else [value]
    for item in values:
        if not isinstance(item, str):
            raise StrictJSONError(f"the {name} member must be a string", name)
        if len(item) > limit:
            raise StrictJSONError(f"the {name} member is longer than {limit} characters", name)
        if _CONTROL.search(item):
            raise StrictJSONError(f"the {name} member holds a control character", name)


def check_jose_members(members: dict[str, Any], *, values_checked: bool = False) -> dict[str, Any]:
    """Check a JWS header, JWT claims set or JWK (see the module docstring); returns ``members``.

    :param values_checked: :func:`check_values` is known to pass (see :func:`jose_object`).
    :raises StrictJSONError: the first refused member.
    """
    if not values_checked:
        check_values(members)
    for name, limit in IDENTIFIER_LIMITS.items():
        if name in members:
            _identifier(name, members[name], limit)
    for name in NUMERIC_DATES:
        numeric_date(members, name)
    return members


def jose_object(segment: str) -> dict[str, Any]:
    """The JSON object of one base64url segment of a compact JWS (header or payload), strictly
    read (:func:`loads`) and checked (:func:`check_jose_members`).

    :raises StrictJSONError: not base64url, not strict JSON, not an object, a refused member.
    """
    raw = b64url_decode(segment)
    value = loads(raw)
    if not isinstance(value, dict):
        raise StrictJSONError("not a JSON object")
    # JSON text holds no raw control character in a string and UTF-8 no surrogate: a NUL or an
    # unpaired surrogate can only come from a \u escape, and no string is longer than the text.
    # Without either, the walk of check_values cannot fail (the common case: a DPoP proof).
    plain = b"\\u" not in raw and len(raw) <= MAX_STRING_LENGTH
    return check_jose_members(value, values_checked=plain)
