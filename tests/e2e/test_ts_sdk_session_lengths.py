"""End to end: session lengths with the official MCP TypeScript SDK 2.x client (docs/how-to/session-lengths.md).

``tests/js/oauth_client.mjs`` with ``callIntervalMs``: one session calling ``whoami`` at intervals,
in both protocol eras (``legacy``: a 2025-11-25 session; ``2026-07-28``: stateless).

* With the protected resource's access-token lifetime at 2 s, the SDK refreshes on each expired
  token's 401 and keeps calling without a new authorization.
* Past the absolute session cap (10 s) the refresh is refused ``invalid_grant``; the SDK drops its
  tokens and starts a new authorization, where the user is shown the consent page again.

The Python SDK's side is in tests/e2e/test_session_lengths.py.
"""

from __future__ import annotations

import pytest

from mcp_oauth.models import AuditEvent, RefreshGeneration
from tests.e2e.test_python_sdk import USERNAME, live  # noqa: F401 - live is a fixture
from tests.e2e.test_session_lengths import short_access_tokens
from tests.e2e.test_ts_sdk_oauth import ERAS, assert_era, auth_code_config, node, run_node, whoami_results  # noqa: F401

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def token_exchanges(report: dict, grant: str, status: int) -> list[dict]:
    return [
        e
        for e in report["exchanges"]
        if e["path"] == "/oauth/token" and e["grantType"] == grant and e["status"] == status
    ]


@pytest.mark.parametrize("era", ERAS)
def test_the_ts_sdk_refreshes_across_short_access_tokens(node, live, era):
    short_access_tokens(live, 2)
    report, authorizations = run_node(node, live.base, auth_code_config(live, era, calls=4, callIntervalMs=2500))
    assert_era(report, era)
    results = whoami_results(report)
    assert len(results) == 4 and {r["user"] for r in results} == {USERNAME}
    assert report["authorizations"] == 1 and len(authorizations) == 1  # one login and consent
    assert len(token_exchanges(report, "authorization_code", 200)) == 1
    assert len(token_exchanges(report, "refresh_token", 200)) >= 3
    assert not [e for e in report["exchanges"] if e["path"] == "/oauth/token" and e["status"] >= 400]
    assert not [e for e in report["exchanges"] if e["status"] >= 500]
    assert RefreshGeneration.objects.values("session_started_at").distinct().count() == 1


@pytest.mark.parametrize("era", ERAS)
def test_past_the_session_cap_the_ts_sdk_is_sent_to_consent_again(node, live, settings, era):
    short_access_tokens(live, 3)
    settings.MCP_OAUTH = {**settings.MCP_OAUTH, "SESSION_MAX_SECONDS": 10}
    # calls at about 0, 5.5 (a refresh within the cap) and 11 s (past it)
    report, authorizations = run_node(
        node, live.base, auth_code_config(live, era, calls=3, callIntervalMs=5500), sdk_warnings=True
    )
    # the SDK says why it authorizes again: our invalid_grant's description
    assert 'OAuth "invalid_grant"' in report["stderr"] and "maximum length" in report["stderr"]
    results = whoami_results(report)
    assert len(results) == 3 and {r["user"] for r in results} == {USERNAME}
    assert len(token_exchanges(report, "refresh_token", 200)) >= 1
    refused = token_exchanges(report, "refresh_token", 400)
    assert len(refused) == 1 and refused[0]["error"] == "invalid_grant"
    assert report["authorizations"] == 2 and len(authorizations) == 2
    # the second authorization showed the consent page (the driver approved it there)
    assert authorizations[1]["consent_pages"] and "TypeScript SDK e2e client" in authorizations[1]["consent_pages"][0]
    assert len(token_exchanges(report, "authorization_code", 200)) == 2
    assert AuditEvent.objects.filter(kind=AuditEvent.Kind.SESSION_CAP_REACHED).count() == 1
