"""One configuration across the fleet (mcp_oauth.management.fleet): the shared secrets named in one place, their
fingerprints in the database, a host with another secret refused naming the setting, and a key
rotated host by host (add as secondary everywhere, promote, remove the old one) accepted at every step.

Each "host" here is this process with the settings that host would have; the check runs against
the real database (real rows, real row locks). tests/topology/test_fleet_secrets.py starts real
servers."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from mcp_oauth.management.fleet import FleetConfigMismatch, check_fleet_config, fingerprint, shared_secrets
from mcp_oauth.models import FleetSecret
from mcp_oauth.signals import shared_secrets as shared_secrets_signal

pytestmark = pytest.mark.django_db

OLD_SECRET, NEW_SECRET, OTHER_SECRET = ("old-" + "a" * 50, "new-" + "b" * 50, "other-" + "c" * 50)
OLD_FERNET, NEW_FERNET, OTHER_FERNET = (Fernet.generate_key().decode() for _ in range(3))
OLD_STATE, NEW_STATE, OTHER_STATE = ("s-old-" + "d" * 40, "s-new-" + "e" * 40, "s-other-" + "f" * 40)
SECRET_KEY, STATE, FERNET = "SECRET_KEY", 'MCP_OAUTH["REQUEST_STATE_KEYS"]', 'ELICITATION["ENCRYPTION_KEYS"]'


def host(settings, secret: list[str], fernet: list[str], state: list[str]) -> None:
    """This process becomes a host with these rings (primary first)."""
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = secret[0], secret[1:]
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": fernet}
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_STATE_KEYS": state}


def outcomes(name: str) -> dict[str, str]:
    return {status.setting: status.outcome for status in check_fleet_config(host=name)}


def test_the_shared_secrets_are_named_in_one_place(settings):
    host(settings, [OLD_SECRET, NEW_SECRET], [OLD_FERNET], [OLD_STATE, NEW_STATE])
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "METRICS_BEARER_TOKEN": "scrape-token-" + "x" * 20}
    rings = shared_secrets()
    assert rings == {
        SECRET_KEY: [OLD_SECRET.encode(), NEW_SECRET.encode()],
        STATE: [OLD_STATE.encode(), NEW_STATE.encode()],
        'MCP_OAUTH["METRICS_BEARER_TOKEN"]': [("scrape-token-" + "x" * 20).encode()],
        FERNET: [OLD_FERNET.encode()],
    }


def test_without_request_state_keys_the_ring_is_the_one_derived_from_the_secret_key_ring(settings):
    host(settings, [OLD_SECRET, NEW_SECRET], [OLD_FERNET], [])
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "REQUEST_STATE_KEYS": None}
    derived = shared_secrets()[STATE]
    assert len(derived) == 2 and all(len(key) == 32 for key in derived)
    assert OLD_SECRET.encode() not in derived
    settings.SECRET_KEY_FALLBACKS = []
    assert shared_secrets()[STATE] == derived[:1]


def test_an_app_adds_its_secret_through_the_signal(settings):
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])

    def add(sender, secrets, **kwargs):
        secrets["SITE_WEBHOOK_KEY"] = ["webhook-" + "k" * 30]

    shared_secrets_signal.connect(add, dispatch_uid="test-site-webhook")
    try:
        assert shared_secrets()["SITE_WEBHOOK_KEY"] == [b"webhook-" + b"k" * 30]
    finally:
        shared_secrets_signal.disconnect(dispatch_uid="test-site-webhook")


def test_a_fingerprint_reveals_nothing_of_the_key():
    salt_a, salt_b = "00" * 16, "11" * 16
    one = fingerprint(OLD_SECRET, salt_a)
    assert len(one) == 64 and int(one, 16) >= 0
    assert OLD_SECRET not in one and OLD_SECRET.encode().hex() not in one
    assert fingerprint(OLD_SECRET, salt_a) == one  # same key, same salt: comparable
    assert fingerprint(OLD_SECRET, salt_b) != one  # another fleet's table: not comparable
    assert fingerprint(NEW_SECRET, salt_a) != one


def test_the_first_host_records_the_fleet_and_the_second_matches(settings):
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    assert outcomes("host-a") == {SECRET_KEY: "recorded", STATE: "recorded", FERNET: "recorded"}
    row = FleetSecret.objects.get(setting=SECRET_KEY)
    assert row.host == "host-a" and row.fingerprints == [fingerprint(OLD_SECRET, row.salt)]
    assert OLD_SECRET not in str(list(FleetSecret.objects.values_list("fingerprints", "salt")))
    assert outcomes("host-b") == {SECRET_KEY: "same", STATE: "same", FERNET: "same"}


@pytest.mark.parametrize(
    ("setting", "rings"),
    [
        (SECRET_KEY, ([OTHER_SECRET], [OLD_FERNET], [OLD_STATE])),
        (FERNET, ([OLD_SECRET], [OTHER_FERNET], [OLD_STATE])),
        (STATE, ([OLD_SECRET], [OLD_FERNET], [OTHER_STATE])),
    ],
)
def test_a_host_with_another_secret_is_refused_naming_the_setting(settings, setting, rings):
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    check_fleet_config(host="host-a")
    recorded = list(FleetSecret.objects.order_by("setting").values_list("setting", "fingerprints", "host"))
    host(settings, *rings)
    with pytest.raises(FleetConfigMismatch) as refused:
        check_fleet_config(host="host-b")
    assert list(refused.value.problems) == [setting]
    assert refused.value.problems[setting] == (
        f"no key of this host's {setting} is known to the fleet (another secret than the other hosts')"
    )
    assert f"\n  {setting}: no key of this host's {setting}" in str(refused.value)
    # nothing recorded: the fleet still has host A's rings
    assert list(FleetSecret.objects.order_by("setting").values_list("setting", "fingerprints", "host")) == recorded


def test_no_record_compares_only(settings):
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    assert {s.outcome for s in check_fleet_config(host="host-a", record=False)} == {"recorded"}
    assert FleetSecret.objects.count() == 0


def test_a_key_rotated_host_by_host_is_accepted_at_every_step(settings):
    """Two hosts, three steps, each done on A then B: every check passes and the record follows."""
    steps = [
        ([OLD_SECRET], [OLD_FERNET], [OLD_STATE]),  # before
        ([OLD_SECRET, NEW_SECRET], [OLD_FERNET, NEW_FERNET], [OLD_STATE, NEW_STATE]),  # 1. new as secondary
        ([NEW_SECRET, OLD_SECRET], [NEW_FERNET, OLD_FERNET], [NEW_STATE, OLD_STATE]),  # 2. new primary
        ([NEW_SECRET], [NEW_FERNET], [NEW_STATE]),  # 3. old removed
    ]
    seen = []
    for number, rings in enumerate(steps):
        for name in ("host-a", "host-b"):
            host(settings, *rings)
            seen.append((number, name, outcomes(name)[SECRET_KEY]))
    assert seen == [
        (0, "host-a", "recorded"),
        (0, "host-b", "same"),
        (1, "host-a", "updated"),
        (1, "host-b", "same"),
        (2, "host-a", "updated"),
        (2, "host-b", "same"),
        (3, "host-a", "updated"),
        (3, "host-b", "same"),
    ]
    row = FleetSecret.objects.get(setting=FERNET)
    assert row.fingerprints == [fingerprint(NEW_FERNET, row.salt)] and row.host == "host-a"  # the last to change it


def test_promoting_a_key_the_fleet_does_not_hold_yet_is_refused(settings):
    """Skipping step 1: the other hosts could not open what this host would seal."""
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    check_fleet_config(host="host-a")
    host(settings, [OLD_SECRET], [NEW_FERNET, OLD_FERNET], [OLD_STATE])
    with pytest.raises(FleetConfigMismatch) as refused:
        check_fleet_config(host="host-b")
    assert refused.value.problems == {
        FERNET: (
            f"this host's primary {FERNET} key is unknown to the fleet: the other hosts could not open what "
            "this host would seal or sign (add the new key as a secondary key on every host first)"
        )
    }


def test_a_host_without_the_fleets_primary_key_is_refused(settings):
    """A host left behind at the old key after the fleet promoted the new one."""
    host(settings, [NEW_SECRET, OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    check_fleet_config(host="host-a")
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    with pytest.raises(FleetConfigMismatch) as refused:
        check_fleet_config(host="host-b")
    assert refused.value.problems == {
        SECRET_KEY: (
            "this host's SECRET_KEY lacks the fleet's primary key: it could not open what the other hosts "
            "seal or sign now (give it the fleet's keys)"
        ),
        # the derived requestState ring follows the SECRET_KEY ring (REQUEST_STATE_KEYS set here: not derived)
    }
