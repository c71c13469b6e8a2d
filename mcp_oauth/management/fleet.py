"""One configuration across the hosts of a deployment: the secrets every host must share, and the
start-up check that refuses a host whose secrets the others do not hold (docs/how-to/many-hosts.md).

The secrets, named in one place (:func:`shared_secrets`), each a key ring with its primary key first:

* ``SECRET_KEY`` with ``SECRET_KEY_FALLBACKS``: Django's sessions and signatures, the DPoP nonces
  (:mod:`mcp_oauth.dpop.nonce`), the tool-call audit trail's argument digests, the Tasks
  idempotency keys, and the requestState key when ``REQUEST_STATE_KEYS`` is unset;
* ``MCP_OAUTH["REQUEST_STATE_KEYS"]``: seals 2026-07-28 ``requestState`` (the ring in use: the
  configured keys, or the keys derived from the ``SECRET_KEY`` ring);
* ``MCP_OAUTH["METRICS_BEARER_TOKEN"]`` when set (every host's ``/metrics`` answers the same scraper);
* what installed apps add through :data:`mcp_oauth.signals.shared_secrets` (the ``elicitation``
  app: ``ELICITATION["ENCRYPTION_KEYS"]``).

:func:`check_fleet_config` compares the fingerprints of this host's rings with the fleet's record
(:class:`~mcp_oauth.models.FleetSecret`, in the shared database) and refuses, naming the setting,
a ring the fleet cannot work with. The rules keep a rotation done host by host working (add the
new key as a secondary key on every host, then make it primary on every host, then remove the old
one) and refuse what would fail requests:

* no key of the ring is known to the fleet: another secret altogether;
* the fleet's primary key is missing: this host could not open what the others seal or sign now;
* this host's primary key is unknown to the fleet: the others could not open what this host would
  seal (add it as a secondary key everywhere first).

An accepted ring becomes the fleet's record. The record is the ring of the host that started last,
not of every running host: finish each step of a rotation on every host before the next step.
"""

from __future__ import annotations

import hashlib
import platform
import secrets as random
from collections.abc import Sequence
from dataclasses import dataclass

from django.conf import settings
from django.db import connection, transaction

from mcp_oauth.mcp_server.transport.request_state import raw_state_keys
from mcp_oauth.models import FleetSecret
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.signals import shared_secrets as shared_secrets_signal

__all__ = ["FleetConfigMismatch", "SecretStatus", "check_fleet_config", "fingerprint", "shared_secrets"]

#: PBKDF2-HMAC-SHA256 iterations of a fingerprint: a weak key (a guessable ``SECRET_KEY``) is not
#: confirmed cheaply from a copy of the table.
ITERATIONS = 100_000
#: The transaction-level advisory lock that serializes the check of hosts starting at once.
LOCK_KEY = 0x6D63_7066  # "mcpf"

Ring = Sequence[str | bytes]


class FleetConfigMismatch(Exception):
    """This host's secrets do not match the fleet's. ``problems``: ``{setting: why}``; the message
    names each setting."""

    def __init__(self, problems: dict[str, str]) -> None:
        self.problems = problems
        lines = [f"{setting}: {why}" for setting, why in problems.items()]
        super().__init__(
            "This host's secrets do not match the other hosts' (docs/how-to/many-hosts.md):\n  " + "\n  ".join(lines)
        )


@dataclass(frozen=True)
class SecretStatus:
    """What the check found for one setting. ``outcome``: ``"recorded"`` (first host),
    ``"same"`` (the fleet's ring), ``"updated"`` (a rotation step: the record now is this ring) or
    ``"replaced"`` (``replace=True`` over a ring that did not fit)."""

    setting: str
    outcome: str
    keys: int


def _as_bytes(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else bytes(key)


def shared_secrets() -> dict[str, list[bytes]]:
    """``{setting: [key, …]}``: every secret setting the hosts must share, its ring's primary key
    first (settings with no key are left out: nothing to compare)."""
    fallbacks = getattr(settings, "SECRET_KEY_FALLBACKS", None) or ()
    found: dict[str, Ring] = {
        "SECRET_KEY": [str(settings.SECRET_KEY), *map(str, fallbacks)],
        'MCP_OAUTH["REQUEST_STATE_KEYS"]': list(raw_state_keys()),
    }
    token = mcp_oauth_settings.METRICS_BEARER_TOKEN
    if token:
        found['MCP_OAUTH["METRICS_BEARER_TOKEN"]'] = [token]
    shared_secrets_signal.send(sender=None, secrets=found)
    rings = {setting: [_as_bytes(key) for key in ring] for setting, ring in found.items()}
    return {setting: ring for setting, ring in rings.items() if ring}


def fingerprint(key: str | bytes, salt: str) -> str:
    """PBKDF2-HMAC-SHA256 of ``key`` under ``salt`` (hex), :data:`ITERATIONS` rounds: 64 hex digits."""
    return hashlib.pbkdf2_hmac("sha256", _as_bytes(key), bytes.fromhex(salt), ITERATIONS).hex()


def _problem(setting: str, mine: list[str], fleet: list[str]) -> str | None:
    if not set(mine) & set(fleet):
        return f"no key of this host's {setting} is known to the fleet (another secret than the other hosts')"
    if fleet[0] not in mine:
        return (
            f"this host's {setting} lacks the fleet's primary key: it could not open what the other hosts "
            "seal or sign now (give it the fleet's keys)"
        )
    if mine[0] not in fleet:
        return (
            f"this host's primary {setting} key is unknown to the fleet: the other hosts could not open what "
            "this host would seal or sign (add the new key as a secondary key on every host first)"
        )
    return None


def check_fleet_config(host: str | None = None, record: bool = True, replace: bool = False) -> list[SecretStatus]:
    """Compare this host's shared secrets with the fleet's record in the database and, when they
    fit, record this host's rings (``record``). ``host``: the name written with the record (default:
    this machine's). ``replace``: record this host's rings even where they do not fit (outcome
    ``"replaced"``): a secret changed outright on purpose (a leaked key), every host then gets the
    new one. Hosts starting at once are serialized (a transaction-level advisory lock on
    PostgreSQL; the row locks elsewhere).

    :returns: one :class:`SecretStatus` per setting of :func:`shared_secrets`.
    :raises FleetConfigMismatch: a ring the fleet cannot work with; nothing is recorded then.
    """
    host = host or platform.node()
    rings = shared_secrets()
    statuses: list[SecretStatus] = []
    problems: dict[str, str] = {}
    with transaction.atomic():
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", [LOCK_KEY])
        known = {row.setting: row for row in FleetSecret.objects.select_for_update().filter(setting__in=rings)}
        for setting, ring in rings.items():
            row = known.get(setting)
            if row is None:
                row = FleetSecret(setting=setting, salt=random.token_hex(16), host=host)
                row.fingerprints = [fingerprint(key, row.salt) for key in ring]
                statuses.append(SecretStatus(setting, "recorded", len(ring)))
                if record:
                    row.save()
                continue
            mine = [fingerprint(key, row.salt) for key in ring]
            problem = _problem(setting, mine, list(row.fingerprints))
            if problem and not replace:
                problems[setting] = problem
                continue
            same = mine == list(row.fingerprints)
            outcome = "replaced" if problem else "same" if same else "updated"
            statuses.append(SecretStatus(setting, outcome, len(ring)))
            if record and not same:
                row.fingerprints, row.host = mine, host
                row.save(update_fields=["fingerprints", "host", "updated_at"])
        if problems:
            transaction.set_rollback(True)
    if problems:
        raise FleetConfigMismatch(problems)
    return statuses
