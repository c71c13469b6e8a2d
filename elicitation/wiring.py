"""Start-up wiring of the elicitation app, run once by :meth:`ElicitationConfig.ready()
<elicitation.apps.ElicitationConfig.ready>`.

* registers the system checks (:mod:`elicitation.checks`) and the signal receivers
  (:mod:`elicitation.signals`);
* joins a user's export and erasure (``mcp_oauth.signals.user_data_export`` /
  ``user_data_erase``: :mod:`elicitation.user_data`);
* adds its completion rate to the admin dashboard (:mod:`elicitation.dashboard`);
* names its Fernet key ring among the secrets every host must share (:mod:`elicitation.fleet`);
* counts elicitations by mode and outcome when metrics are on (:mod:`elicitation.metrics`);
* plugs its cipher in as ``MCP_OAUTH["TASKS_RESULT_CIPHER"]`` when the site sets none:
  :mod:`elicitation.crypto` (Fernet under ``ELICITATION["ENCRYPTION_KEYS"]``) encrypts the results
  of task tools declared with ``encrypt_result=True``. ``mcp_oauth`` names no cipher of
  elicitation's itself (it never imports elicitation).
"""

from __future__ import annotations

from elicitation import checks, dashboard, fleet, metrics, signals, user_data  # noqa: F401 - registering checks and receivers
from mcp_oauth.settings import mcp_oauth_settings
from mcp_oauth.signals import (
    admin_dashboard,
    organization_member_removed,
    shared_secrets,
    user_data_erase,
    user_data_export,
)

#: What this app plugs in as ``MCP_OAUTH["TASKS_RESULT_CIPHER"]`` when the site sets none.
TASKS_RESULT_CIPHER = "elicitation.crypto"


def wire() -> None:
    """Connect the receivers and plug the cipher in (idempotent: ``dispatch_uid``, same default)."""
    user_data_erase.connect(user_data.erase_rows, dispatch_uid="elicitation.user_data.erase")
    user_data_export.connect(user_data.export_sections, dispatch_uid="elicitation.user_data.export")
    admin_dashboard.connect(dashboard.add_panel, dispatch_uid="elicitation.dashboard")
    shared_secrets.connect(fleet.add_encryption_keys, dispatch_uid="elicitation.fleet")
    organization_member_removed.connect(
        user_data.organization_member_removed, dispatch_uid="elicitation.user_data.organization_member_removed"
    )
    metrics.connect()  # mcp_elicitations_total (no-op while metrics are off)
    mcp_oauth_settings.plug_default("TASKS_RESULT_CIPHER", TASKS_RESULT_CIPHER)
