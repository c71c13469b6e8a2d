"""``manage.py check_fleet_config`` (mcp_oauth.management.commands.check_fleet_config): one line per
setting, a refusal naming the mismatched setting (exit status 1 from the command line)."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from mcp_oauth.models import FleetSecret
from tests.mcp_oauth.management.test_fleet import OLD_FERNET, OLD_SECRET, OLD_STATE, OTHER_FERNET, host

pytestmark = pytest.mark.django_db


def test_the_command_refuses_with_the_setting_named_and_prints_each_outcome(settings, capsys):
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    call_command("check_fleet_config", "--host", "host-a")
    assert capsys.readouterr().out.splitlines() == [
        "SECRET_KEY: recorded (1 key)",
        'MCP_OAUTH["REQUEST_STATE_KEYS"]: recorded (1 key)',
        'ELICITATION["ENCRYPTION_KEYS"]: recorded (1 key)',
    ]
    host(settings, [OLD_SECRET], [OTHER_FERNET], [OLD_STATE])
    with pytest.raises(CommandError, match=r'ELICITATION\["ENCRYPTION_KEYS"\]: no key of this host'):
        call_command("check_fleet_config", "--host", "host-b")


def test_no_record_leaves_the_fleet_unrecorded(settings, capsys):
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    call_command("check_fleet_config", "--no-record")
    assert "SECRET_KEY: recorded (1 key)" in capsys.readouterr().out
    host(settings, [OLD_SECRET], [OTHER_FERNET], [OLD_STATE])
    call_command("check_fleet_config", "--no-record")  # nothing was recorded: nothing to differ from


def test_replace_records_a_secret_changed_outright(settings, capsys):
    """A leaked key replaced at once (no rotation): --replace makes this host's ring the fleet's;
    a host still holding the old one is then refused."""
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    call_command("check_fleet_config", "--host", "host-a")
    host(settings, [OLD_SECRET], [OTHER_FERNET], [OLD_STATE])
    capsys.readouterr()
    call_command("check_fleet_config", "--host", "host-a", "--replace")
    assert capsys.readouterr().out.splitlines() == [
        "SECRET_KEY: same (1 key)",
        'MCP_OAUTH["REQUEST_STATE_KEYS"]: same (1 key)',
        'ELICITATION["ENCRYPTION_KEYS"]: replaced (1 key)',
    ]
    call_command("check_fleet_config", "--host", "host-b")  # the new ring
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    with pytest.raises(CommandError, match=r'ELICITATION\["ENCRYPTION_KEYS"\]: no key of this host'):
        call_command("check_fleet_config", "--host", "host-c")


@pytest.mark.parametrize("name", ["h" * 256, "host\x00a"])
def test_a_host_name_the_record_cannot_hold_is_refused_as_such_not_as_a_missing_migration(settings, name):
    """``--host`` is stored with the record (255 characters, PostgreSQL text holds no NUL): a name
    that does not fit is named as the problem; nothing is recorded."""
    host(settings, [OLD_SECRET], [OLD_FERNET], [OLD_STATE])
    with pytest.raises(CommandError) as refused:
        call_command("check_fleet_config", "--host", name)
    assert str(refused.value) == "--host must be 1 to 255 characters without a NUL byte."
    assert not FleetSecret.objects.exists()
