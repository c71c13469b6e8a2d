"""Sealed ``requestState`` (MCP 2026-07-28 "Multi round-trip requests" / "Security").

The client echoes ``requestState`` byte for byte, so it is attacker-controlled input. Here it is
an AEAD token (AES-256-GCM, ``cryptography``) that only this site's workers can open::

    v1.<kid>.<base64url(nonce[12] || ciphertext || tag)>

``kid`` names the key (rotation: ``MCP_OAUTH["REQUEST_STATE_KEYS"]``, first key seals, all keys
open; default: one key derived from ``SECRET_KEY`` with HKDF-SHA256, and one from each of
``SECRET_KEY_FALLBACKS``, which open only). The plaintext is JSON claims::

    {"jti", "iat", "exp",                      # id, issued-at, expiry (seconds since the epoch)
     "iss", "cid", "sub", "res", "org",        # principal: issuer, client_id, user pk, resource, organization pk
     "m", "t", "ad",                           # method, tool name, SHA-256 of the canonical arguments
     "asked": {...}, "settled": {...}}         # see mcp_oauth.mcp_server.transport.input_required

:func:`open_state` refuses (-32602 ``Invalid params``, one message for every case) a token that is
malformed, sealed with an unknown key, tampered with, expired, bound to another principal, method,
tool or arguments, or already used: each state opens once (the ``jti`` is recorded in the cache
``MCP_OAUTH["THROTTLE_CACHE"]`` until it expires; use a shared cache with several processes).
Where a state carries what authorizes something, single use does not rest on the cache alone: a
form answer is applied by moving the form row the state names out of ``pending`` in the database
(``elicitation.api``), so a replay on any worker is refused. A replayed URL-mode state only runs
the tool again, which reads the user's connection or secret from the database as any call does.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from functools import lru_cache
from typing import Any

import mcp_types as types
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.cache import caches

from mcp_oauth.mcp_server.transport.input_required import InputRequired, InputRound
from mcp_oauth.mcp_server.transport.jsonrpc import INVALID_PARAMS, McpError
from mcp_oauth.settings import mcp_oauth_settings

__all__ = [
    "InvalidRequestState",
    "arguments_digest",
    "input_required_result",
    "open_round",
    "open_state",
    "principal_claims",
    "raw_state_keys",
    "seal_state",
    "state_keys",
]

VERSION = "v1"
#: Longest token accepted (a bigger one is refused before decoding).
MAX_TOKEN_CHARS = 64 * 1024
_AAD = b"mcp-oauth requestState v1"
_CACHE_PREFIX = "mcp_oauth:request_state:used:"


class InvalidRequestState(McpError):
    """-32602: the ``requestState`` cannot be used (never says why: the client gets one message)."""

    def __init__(self) -> None:
        super().__init__(
            INVALID_PARAMS, "Invalid params: requestState is invalid, expired or was not issued for this request"
        )


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@lru_cache(maxsize=8)
def _derive(secret_key: str) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"mcp-oauth", info=b"requestState AES-256-GCM key").derive(
        secret_key.encode("utf-8")
    )


@lru_cache(maxsize=8)
def _ring(raw: tuple[bytes, ...]) -> tuple[tuple[str, AESGCM], ...]:
    ring = []
    for secret in raw:
        key = hashlib.sha256(b"mcp-oauth requestState key\x00" + secret).digest()
        kid = hashlib.sha256(key).hexdigest()[:8]
        ring.append((kid, AESGCM(key)))
    return tuple(ring)


def raw_state_keys() -> tuple[bytes, ...]:
    """The secrets of the requestState key ring, the sealing one first: ``REQUEST_STATE_KEYS``, or
    one key derived from ``SECRET_KEY`` and one from each of ``SECRET_KEY_FALLBACKS`` (so a
    ``SECRET_KEY`` rotated host by host keeps the states the other hosts sealed)."""
    configured = mcp_oauth_settings.REQUEST_STATE_KEYS
    if configured:
        return tuple(k.encode("utf-8") if isinstance(k, str) else bytes(k) for k in configured)
    fallbacks = getattr(settings, "SECRET_KEY_FALLBACKS", None) or ()
    return tuple(_derive(str(secret)) for secret in (settings.SECRET_KEY, *fallbacks))


def state_keys() -> tuple[tuple[str, AESGCM], ...]:
    """``(kid, AESGCM)`` of every configured key, the sealing key first."""
    return _ring(raw_state_keys())


def arguments_digest(arguments: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``arguments`` (sorted keys, no spaces)."""
    canonical = json.dumps(
        arguments if arguments is not None else {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False
    )
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def principal_claims(principal: Any) -> dict[str, Any]:
    """The principal binding: issuer, client_id, user pk ("" without a user), resource URI and
    the pk of the organization the request acts for ("" for none: a state sealed for one
    organization never opens for another)."""
    user = principal.user
    organization = getattr(principal, "organization", None)
    return {
        "iss": mcp_oauth_settings.issuer,
        "cid": principal.client_id or "",
        "sub": "" if getattr(user, "pk", None) is None else str(user.pk),
        "res": principal.resource.uri,
        "org": "" if organization is None else str(organization.pk),
    }


def seal_state(binding: Mapping[str, Any], payload: dict[str, Any], *, ttl: float | None = None) -> str:
    """A new token carrying ``binding`` (principal, method, tool, arguments digest) and ``payload``."""
    now = int(time.time())
    lifetime = int(mcp_oauth_settings.REQUEST_STATE_TTL_SECONDS if ttl is None else ttl)
    claims = {**payload, **binding, "jti": secrets.token_urlsafe(16), "iat": now, "exp": now + max(1, lifetime)}
    kid, aead = state_keys()[0]
    nonce = os.urandom(12)
    plaintext = json.dumps(claims, separators=(",", ":")).encode("utf-8")
    return f"{VERSION}.{kid}.{_b64(nonce + aead.encrypt(nonce, plaintext, _AAD + kid.encode()))}"


def _decrypt(token: Any) -> dict[str, Any]:
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        raise InvalidRequestState()
    parts = token.split(".")
    if len(parts) != 3 or parts[0] != VERSION:
        raise InvalidRequestState()
    _, kid, body = parts
    aead = dict(state_keys()).get(kid)
    if aead is None:
        raise InvalidRequestState()
    try:
        blob = _unb64(body)
        if len(blob) < 12 + 16:
            raise InvalidRequestState()
        plaintext = aead.decrypt(blob[:12], blob[12:], _AAD + kid.encode())
        claims = json.loads(plaintext)
    except (InvalidTag, binascii.Error, ValueError):
        raise InvalidRequestState() from None
    if not isinstance(claims, dict):
        raise InvalidRequestState()
    return claims


def open_state(token: Any, binding: Mapping[str, Any], *, consume: bool = True) -> dict[str, Any]:
    """The claims of ``token`` once it is proven genuine, fresh, bound to ``binding`` and unused.

    :param binding: the expected ``iss``/``cid``/``sub``/``res``/``org``/``m``/``t``/``ad`` values.
    :param consume: record the token as used (a second :func:`open_state` of it fails).
    :raises McpError: -32602 in every refused case.
    """
    claims = _decrypt(token)
    exp = claims.get("exp")
    if not isinstance(exp, int) or exp <= time.time():
        raise InvalidRequestState()
    for key, value in binding.items():
        if claims.get(key) != value:
            raise InvalidRequestState()
    jti = claims.get("jti")
    if not isinstance(jti, str) or not jti:
        raise InvalidRequestState()
    if consume:
        cache = caches[mcp_oauth_settings.THROTTLE_CACHE]
        remaining = max(1, int(exp - time.time()) + 1)
        if not cache.add(_CACHE_PREFIX + hashlib.sha256(jti.encode()).hexdigest(), 1, timeout=remaining):
            raise InvalidRequestState()
    return claims


def _has_containers(arguments: Any) -> bool:
    """Whether ``arguments`` is not a mapping of scalars only (what a tool cannot change in place)."""
    return not isinstance(arguments, dict) or not all(isinstance(value, _SCALARS) for value in arguments.values())


_SCALARS = (str, int, float, bool, type(None))


class _LazyBinding(Mapping[str, Any]):
    """The binding of :func:`open_round` for a call without ``requestState``, computed on first read."""

    __slots__ = ("_args", "_value")

    def __init__(self, call: Any, name: str, arguments: Any, digest: str | None) -> None:
        self._args: tuple[Any, str, Any, str | None] | None = (call, name, arguments, digest)
        self._value: dict[str, Any] = {}

    def _binding(self) -> dict[str, Any]:
        if self._args is not None:
            call, name, arguments, digest = self._args
            self._value = {
                **principal_claims(call.principal),
                "m": call.method,
                "t": name,
                "ad": digest if digest is not None else arguments_digest(arguments),
            }
            self._args = None
        return self._value

    def __getitem__(self, key: str) -> Any:
        return self._binding()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._binding())

    def __len__(self) -> int:
        return len(self._binding())


def open_round(call: Any, name: str, arguments: Any) -> tuple[InputRound, Mapping[str, Any]]:
    """The :class:`InputRound` of a modern ``tools/call`` / ``prompts/get`` / ``resources/read`` and
    the binding its next ``requestState`` must carry (principal, ``call.method``, ``name``, digest
    of ``arguments``). A call without ``requestState`` starts a fresh round (its ``inputResponses``
    still reach :meth:`InputRound.offered`: a client may answer up front; nothing is settled or
    asked yet).

    :raises McpError: -32602 for a ``requestState`` that :func:`open_state` refuses.
    """
    state = call.params.get("requestState")
    if state is None:
        # A first round needs its binding only if the tool asks for input: computed then. The
        # arguments digest is taken now when an argument is a container (the tool may change it).
        digest = arguments_digest(arguments) if _has_containers(arguments) else None
        return InputRound(responses=call.params.get("inputResponses")), _LazyBinding(call, name, arguments, digest)
    binding = {**principal_claims(call.principal), "m": call.method, "t": name, "ad": arguments_digest(arguments)}
    claims = open_state(state, binding)
    asked = claims.get("asked") if isinstance(claims.get("asked"), dict) else {}
    settled = claims.get("settled") if isinstance(claims.get("settled"), dict) else {}
    return InputRound(asked, call.params.get("inputResponses"), settled, claims.get("jti")), binding


def input_required_result(
    binding: Mapping[str, Any], needed: InputRequired, input_round: InputRound
) -> types.InputRequiredResult:
    """``resultType: "input_required"`` for ``needed``, with a fresh sealed ``requestState`` carrying
    what was asked and everything settled so far."""
    token = seal_state(binding, {"asked": needed.asked, "settled": input_round.settled_values})
    # Validated from plain JSON: pydantic turns each request into its CreateMessage/ListRoots/Elicit model.
    return types.InputRequiredResult.model_validate({"input_requests": needed.requests or None, "request_state": token})
