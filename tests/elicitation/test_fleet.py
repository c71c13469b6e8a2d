"""The elicitation app's Fernet key ring among the secrets every host must share (elicitation.fleet)."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet

from elicitation.fleet import SETTING
from mcp_oauth.management.fleet import FleetConfigMismatch, check_fleet_config, shared_secrets

pytestmark = pytest.mark.django_db


def test_the_ring_is_named_with_its_keys_newest_first(settings):
    new, old = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [new, old]}
    assert SETTING == 'ELICITATION["ENCRYPTION_KEYS"]'
    assert shared_secrets()[SETTING] == [new.encode(), old.encode()]
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": new}  # one key as a string
    assert shared_secrets()[SETTING] == [new.encode()]


def test_no_key_no_comparison(settings):
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": []}
    assert SETTING not in shared_secrets()


def test_a_host_with_another_fernet_ring_is_refused(settings):
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    check_fleet_config(host="host-a")
    settings.ELICITATION = {**settings.ELICITATION, "ENCRYPTION_KEYS": [Fernet.generate_key().decode()]}
    with pytest.raises(FleetConfigMismatch) as refused:
        check_fleet_config(host="host-b")
    assert list(refused.value.problems) == [SETTING]
