"""One configuration across the fleet, with real servers on loopback sharing one PostgreSQL and Redis.

* A host whose ``SECRET_KEY``, Fernet ring or requestState ring differs from the fleet's is refused
  at start, the setting named: ``manage.py check_fleet_config`` exits 1, ``python -m project.serve
  prepare`` (what ``make serve`` runs first) exits 3 before starting anything.
* All three keys rotated host by host, as docs/how-to/many-hosts.md says (the new key added as a
  secondary key on A then B, made primary on A then B, ``rotate_elicitation_keys``, the old key
  removed on A then B), each host restarted after ``check_fleet_config`` accepted its new rings. In
  each of the 7 states of the roll, two whole flows cross the hosts both ways: a 2026-07-28
  ``tools/call`` of ``demo_profile`` (the provider is the site itself) answered ``input_required``
  on one host, a person signing in on the other host's login page, the provider's consent, the
  provider callback (the code exchanged with the provider client secret, Fernet-encrypted; the
  tokens stored encrypted) on one host, the retry with ``requestState`` on the other: every login,
  callback and retry succeeds (0 failed logins, 0 failed callbacks, 0 refused ``requestState``),
  and a session signed in before the roll stays signed in on both hosts throughout.

Skipped unless the test database is PostgreSQL and Redis answers.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2
import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.hashers import make_password
from django.core.management import call_command

from elicitation.models import ThirdPartyConnection
from mcp_oauth.resource_server.default_resource import ensure_default_resource
from tests.support.cross_worker_url import PageUser, final_message, modern_call, modern_headers, without_meta
from tests.support.elicitation_helpers import PASSWORD
from tests.support.live import free_port
from tests.support.topology import REDIS_URL, ROOT, database_url, require_postgres_and_redis, start_uvicorn

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

OLD, NEW = "fleet-old-secret-" + "o" * 40, "fleet-new-secret-" + "n" * 40
OLD_F, NEW_F = Fernet.generate_key().decode(), Fernet.generate_key().decode()
OLD_S, NEW_S = "fleet-old-state-" + "s" * 32, "fleet-new-state-" + "t" * 32
OTHER = {"secret": ["fleet-other-secret-" + "x" * 40], "fernet": [Fernet.generate_key().decode()], "state": ["x" * 48]}


@dataclass(frozen=True)
class Rings:
    """A host's key rings, primary first."""

    secret: list[str]
    fernet: list[str]
    state: list[str]


ROLL = [
    Rings([OLD], [OLD_F], [OLD_S]),  # before
    Rings([OLD, NEW], [OLD_F, NEW_F], [OLD_S, NEW_S]),  # 1. the new key added as a secondary key
    Rings([NEW, OLD], [NEW_F, OLD_F], [NEW_S, OLD_S]),  # 2. the new key made primary
    Rings([NEW], [NEW_F], [NEW_S]),  # 3. the old key removed
]


def host_env(base: str, prefix: str, rings: Rings) -> dict[str, str]:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.support.worker_settings",
        "DATABASE_URL": database_url(),
        "DB_POOL_MAX_SIZE": "3",
        "MCP_BASE_URL": base,
        "DJANGO_DEBUG": "1",
        "DJANGO_SECRET_KEY": rings.secret[0],
        "DJANGO_SECRET_KEY_FALLBACKS": ",".join(rings.secret[1:]),
        "ELICITATION_ENCRYPTION_KEYS": ",".join(rings.fernet),
        "MCP_REQUEST_STATE_KEYS": ",".join(rings.state),
        "REDIS_URL": REDIS_URL,
        "CACHE_KEY_PREFIX": prefix,
        "PYTHONUNBUFFERED": "1",
    }
    for name in ("CELERY_BROKER_URL", "MCP_WAKEUP_URL"):
        env.pop(name, None)
    return env


def manage(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def fleet(settings, user, public_app, mint_token):
    """The base URL (host A's), a token of ``alice``, the demo provider (this site) with its client
    secret encrypted under the old Fernet key; the fleet's record holds the old rings."""
    require_postgres_and_redis()
    port_a = free_port()
    base = f"http://127.0.0.1:{port_a}"
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "BASE_URL": base}
    settings.ALLOWED_HOSTS = ["127.0.0.1"]
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [OLD_F]}
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    type(user).objects.filter(pk=user.pk).update(password=make_password(PASSWORD))
    call_command("ensure_demo_provider", stdout=open(os.devnull, "w"))
    token = mint_token(user, public_app, "mcp", ensure_default_resource().uri)
    prefix = "fleet-" + secrets.token_hex(4)
    recorded = manage(host_env(base, prefix, ROLL[0]), "check_fleet_config", "--host", "first")
    assert recorded.returncode == 0, recorded.stderr
    return port_a, base, prefix, token


@pytest.mark.parametrize(
    ("changed", "setting"),
    [
        ("secret", "SECRET_KEY"),
        ("fernet", 'ELICITATION["ENCRYPTION_KEYS"]'),
        ("state", 'MCP_OAUTH["REQUEST_STATE_KEYS"]'),
    ],
)
def test_a_host_with_another_key_refuses_to_start_naming_the_setting(fleet, changed, setting):
    _, base, prefix, _ = fleet
    rings = Rings(**{**ROLL[0].__dict__, changed: OTHER[changed]})
    refused = manage(host_env(base, prefix, rings), "check_fleet_config", "--host", "other")
    assert refused.returncode == 1
    assert (
        f"CommandError: This host's secrets do not match the other hosts' (docs/how-to/many-hosts.md):\n  {setting}: "
        in (refused.stderr)
    )
    other_settings = {"SECRET_KEY", 'ELICITATION["ENCRYPTION_KEYS"]', 'MCP_OAUTH["REQUEST_STATE_KEYS"]'} - {setting}
    assert not any(f"\n  {name}: " in refused.stderr for name in other_settings)


def test_serve_prepare_refuses_a_host_with_another_fernet_ring(fleet, tmp_path):
    _, base, prefix, _ = fleet
    env = {
        **host_env(base, prefix, Rings([OLD], OTHER["fernet"], [OLD_S])),
        "DJANGO_SETTINGS_MODULE": "project.settings",
        "DJANGO_INSECURE_LOOPBACK_HTTP": "1",
        "DJANGO_DEBUG": "0",
        "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
        "SERVE_SECRETS_DIR": str(tmp_path / "secrets"),
    }
    refused = subprocess.run(
        [sys.executable, "-m", "project.serve", "prepare"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert refused.returncode == 3
    assert '\n  ELICITATION["ENCRYPTION_KEYS"]: no key of this host\'s ELICITATION["ENCRYPTION_KEYS"]' in refused.stderr
    assert "prepare failed (manage.py check_fleet_config, exit status 1): not starting." in refused.stderr
    assert "DJANGO_SECRET_KEY: from the environment" in refused.stdout


class Host:
    """One host: a uvicorn process of the site on ``port``, restarted with other rings."""

    def __init__(self, name: str, port: int, base: str, prefix: str) -> None:
        self.name, self.port, self.base, self.prefix = name, port, base, prefix
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def start(self, rings: Rings) -> None:
        env = host_env(self.base, self.prefix, rings)
        checked = manage(env, "check_fleet_config", "--host", self.name)  # the prepare step's check
        assert checked.returncode == 0, checked.stderr
        self.process = start_uvicorn(self.port, env)

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
            self.process = None


@contextlib.contextmanager
def two_hosts(port_a: int, base: str, prefix: str) -> Iterator[dict[str, Host]]:
    hosts = {"a": Host("host-a", port_a, base, prefix), "b": Host("host-b", free_port(), base, prefix)}
    try:
        yield hosts
    finally:
        for host in hosts.values():
            host.stop()


def on(host: Host, link: str) -> str:
    parts = urlsplit(link)
    return host.url + parts.path + (f"?{parts.query}" if parts.query else "")


def connect_flow(http: httpx2.Client, token: str, username: str, first: Host, second: Host, n: int) -> dict[str, int]:
    """The whole flow, alternating hosts: tools/call on ``first``; sign in, consent and callback on
    ``second``; the retry with requestState on ``first``'s counterpart ``second``. :returns: what
    succeeded (each must be 1)."""
    ThirdPartyConnection.objects.all().delete()  # each flow connects anew
    response = http.post(
        f"{first.url}/mcp", headers=modern_headers(token, "demo_profile"), json=modern_call("demo_profile", n)
    )
    result = final_message(response, n)["result"]
    assert result["resultType"] == "input_required", result
    (key,) = result["inputRequests"]
    link, state = result["inputRequests"][key]["params"]["url"], result["requestState"]
    person = PageUser(username)
    try:
        interstitial = person.open(on(second, link))  # signs in on second's login page
        to_provider = person.submit(on(second, link), interstitial, action="continue")
        assert to_provider.status_code == 303, to_provider.text[:300]
        consent_url = on(first, to_provider.headers["location"])  # the provider's authorize on the other host
        consent = person.open(consent_url)
        allowed = person.submit(consent_url, consent, allow="Authorize")
        assert allowed.status_code == 303, allowed.text[:300]
        callback = person.http.get(on(second, allowed.headers["location"]))  # the provider callback
        assert callback.status_code == 200, callback.text[:500]
    finally:
        person.close()
    call = modern_call("demo_profile", n + 1, requestState=state, inputResponses={key: {"action": "accept"}})
    retried = http.post(f"{second.url}/mcp", headers=modern_headers(token, "demo_profile"), json=call)
    assert retried.status_code == 200, retried.text
    done = without_meta(final_message(retried, n + 1)["result"])
    assert done["resultType"] == "complete" and done.get("isError") is False, done
    assert done["structuredContent"]["profile"]["username"] == username, done
    return {"login": 1, "callback": 1, "request_state": 1}


def test_keys_rotated_host_by_host_fail_nothing_during_the_roll(fleet, user):
    port_a, base, prefix, token = fleet
    username = user.get_username()
    counts = {"login": 0, "callback": 0, "request_state": 0}
    states = []
    kept = PageUser(username)  # signed in before the roll
    with two_hosts(port_a, base, prefix) as hosts, httpx2.Client(timeout=30) as http:

        def round_trip(label: str) -> None:
            states.append(label)
            for n, (first, second) in enumerate([("a", "b"), ("b", "a")]):
                done = connect_flow(http, token, username, hosts[first], hosts[second], 10 * len(states) + 2 * n)
                for name, value in done.items():
                    counts[name] += value
            for host in hosts.values():  # the session of before the roll is still signed in on both hosts
                page = kept.http.get(f"{host.url}/oauth/connected-apps/")
                assert page.status_code == 200, (label, host.name, page.status_code, page.headers.get("location"))

        hosts["a"].start(ROLL[0])
        hosts["b"].start(ROLL[0])
        kept.open(f"{hosts['a'].url}/oauth/connected-apps/")
        round_trip("A0 B0")
        for step in (1, 2, 3):
            if step == 3:  # everything the fleet stored re-encrypted under the new primary key first
                rotated = manage(host_env(base, prefix, ROLL[2]), "rotate_elicitation_keys")
                assert rotated.returncode == 0, rotated.stderr
            for name, label in (("a", f"A{step} B{step - 1}"), ("b", f"A{step} B{step}")):
                hosts[name].stop()
                hosts[name].start(ROLL[step])
                round_trip(label)
    kept.close()
    assert states == ["A0 B0", "A1 B0", "A1 B1", "A2 B1", "A2 B2", "A3 B2", "A3 B3"]
    assert counts == {"login": 14, "callback": 14, "request_state": 14}
