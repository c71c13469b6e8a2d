"""The ELICITATION settings namespace (elicitation.settings): documented defaults, the site's values
over them, a reload when a test changes the setting, AttributeError for an unknown key."""

from __future__ import annotations

import pytest

from elicitation.settings import DEFAULTS, elicitation_settings


def test_the_defaults_are_the_documented_values(settings):
    settings.ELICITATION = {}
    assert elicitation_settings.ENCRYPTION_KEYS == []
    assert elicitation_settings.URL_ELICITATION_TTL_SECONDS == 600  # SEP-1036: at most 10 minutes
    assert elicitation_settings.URL_RETRY_WAIT_SECONDS == 120.0
    assert elicitation_settings.URL_ANSWER_TIMEOUT_SECONDS == 300.0
    assert elicitation_settings.STATE_TTL_SECONDS == 600
    assert elicitation_settings.HTTP_TIMEOUT_SECONDS == 10.0
    assert elicitation_settings.REFRESH_MARGIN_SECONDS == 60
    assert elicitation_settings.SECRET_MAX_LENGTH == 4096
    assert elicitation_settings.NOTIFY_IN_TRANSACTION is True
    assert elicitation_settings.RETENTION_DAYS == 30
    assert elicitation_settings.START_TEMPLATE == "elicitation/start.html"
    assert elicitation_settings.CONNECTIONS_TEMPLATE == "elicitation/connections.html"


def test_no_default_holds_a_dotted_path_to_import():
    # nothing is imported from a string: the only dotted strings are template names
    for name, value in DEFAULTS.items():
        if isinstance(value, str):
            assert name.endswith("_TEMPLATE") and value.startswith("elicitation/") and value.endswith(".html")


def test_the_sites_value_wins_and_a_change_reloads(settings):
    settings.ELICITATION = {"URL_ELICITATION_TTL_SECONDS": 120, "RETENTION_DAYS": None}
    assert elicitation_settings.URL_ELICITATION_TTL_SECONDS == 120
    assert elicitation_settings.RETENTION_DAYS is None
    assert elicitation_settings.STATE_TTL_SECONDS == 600  # the others keep their defaults
    settings.ELICITATION = {"URL_ELICITATION_TTL_SECONDS": 300}
    assert elicitation_settings.URL_ELICITATION_TTL_SECONDS == 300
    assert elicitation_settings.RETENTION_DAYS == 30


def test_an_unknown_key_is_an_attribute_error(settings):
    settings.ELICITATION = {}
    with pytest.raises(AttributeError):
        elicitation_settings.NO_SUCH_SETTING  # noqa: B018 - the lookup is the assertion
