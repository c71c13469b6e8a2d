"""The fleet's shared secrets screen (mcp_oauth.admin.fleet): the settings recorded by the hosts,
the size of each ring, read-only, no fingerprint shown; a deleted row is recorded anew by the next
host. In Chromium: tests/browser/test_fleet_admin.py."""

from __future__ import annotations

import pytest

from mcp_oauth.management.fleet import check_fleet_config
from mcp_oauth.models import FleetSecret
from tests.mcp_oauth.admin.test_admin import admin, url  # noqa: F401 - fixtures and helpers
from tests.mcp_oauth.management.test_fleet import NEW_FERNET, OLD_FERNET, OLD_STATE, host

pytestmark = pytest.mark.django_db

# The hosts here keep the test's SECRET_KEY: another one would sign the administrator out.


def test_the_list_shows_each_setting_its_ring_size_and_host_and_no_fingerprint(admin, settings):
    host(settings, [settings.SECRET_KEY], [NEW_FERNET, OLD_FERNET], [OLD_STATE])
    check_fleet_config(host="host-a")
    page = admin.get(url(FleetSecret)).content.decode()
    assert "SECRET_KEY" in page and "ELICITATION[&quot;ENCRYPTION_KEYS&quot;]" in page
    assert page.count('<td class="field-keys">2</td>') == 1 and page.count('<td class="field-keys">1</td>') == 2
    assert page.count('<td class="field-host">host-a</td>') == 3
    for row in FleetSecret.objects.all():
        assert not any(fingerprint in page for fingerprint in row.fingerprints)
        assert row.salt not in page


def test_rows_are_not_added_or_edited_by_hand(admin, settings):
    host(settings, [settings.SECRET_KEY], [OLD_FERNET], [OLD_STATE])
    check_fleet_config(host="host-a")
    row = FleetSecret.objects.get(setting="SECRET_KEY")
    assert admin.get(url(FleetSecret, "add")).status_code == 403
    admin.post(url(FleetSecret, "change", row.pk), {"setting": "SECRET_KEY", "host": "evil"})
    assert FleetSecret.objects.get(pk=row.pk).host == "host-a"
    page = admin.get(url(FleetSecret, "change", row.pk)).content.decode()
    assert row.fingerprints[0] not in page and 'name="_save"' not in page


def test_a_deleted_row_is_recorded_anew_by_the_next_host(admin, settings):
    host(settings, [settings.SECRET_KEY], [OLD_FERNET], [OLD_STATE])
    check_fleet_config(host="host-a")
    row = FleetSecret.objects.get(setting='ELICITATION["ENCRYPTION_KEYS"]')
    response = admin.post(url(FleetSecret, "delete", row.pk), {"post": "yes"})
    assert response.status_code == 302
    host(settings, [settings.SECRET_KEY], [NEW_FERNET], [OLD_STATE])
    outcomes = {s.setting: s.outcome for s in check_fleet_config(host="host-b")}
    assert outcomes['ELICITATION["ENCRYPTION_KEYS"]'] == "recorded"
