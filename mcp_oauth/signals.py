"""Signals the app sends (this module defines them only: it imports no model, so every floor may
import it).

* :data:`mcp_session_started` — ``sender=McpSession, session=…`` after ``initialize``.
* :data:`mcp_session_ended` — ``sender=McpSession, session=…`` after DELETE.
* :data:`tool_called` — ``sender=Tool, tool=…, principal=…, is_error=bool`` after ``tools/call``
  ran the tool (not for arguments refused by the input schema: the tool did not run).
* :data:`authorization_code_replayed` — ``sender=RedeemedAuthorizationCode, redeemed=…, application=…``
  when a used code came back with its verifier and its tokens were revoked.
* :data:`user_grants_revoked` — ``sender=<user model>, user=…, application=… or None, reason=…,
  access_token_ids=[…]`` after :func:`mcp_oauth.authorization_server.tokens.grants.revoke_user_grants` committed (password
  change, deactivation, deletion, a user disconnecting a client): drop cached token principals.
* :data:`client_response_received` — ``sender=McpSession, session=…, message=…`` when the
  client POSTs a JSON-RPC response (or error) that no request of *this process* waits for:
  it answers a request another worker sent, or one sent through the session outbox. A
  receiver that knows the id stores the answer where the asker looks (the ``elicitation``
  app records answers to its ``elicitation/create`` requests this way).
* :data:`task_created` — ``sender=McpTask, task=…`` once an MCP task's row is committed
  (:mod:`mcp_oauth.mcp_server.mcp_tasks`).
* :data:`task_finished` — ``sender=McpTask, task=…`` when a task reached ``completed``, ``failed``
  or ``cancelled``.
* :data:`user_data_export` — ``sender=<user model>, user=…, export=UserDataExport`` while a user's
  data export is assembled (GDPR Art. 15/20): a receiver contributes a section with
  ``export.add_section(name, rows)`` (``rows``: an iterable of JSON-able dicts, read lazily while
  the document streams). The ``elicitation`` app adds its sections this way.
* :data:`user_data_erase` — ``sender=<user model>, user=…, reason=…, counts={…}`` inside the
  transaction that erases a user's data (account deletion, the erase action and command): a
  receiver deletes the site's own rows of that user and may add ``counts[name] = n``. The
  ``elicitation`` app erases its elicitations, connections and stored secrets this way.
* :data:`request_shed` — ``sender=None, reason=…, client_id=… or None, path=…`` when a request
  was refused for load (``reason``: ``"in_flight"``, a worker's bound on requests in flight,
  answered 503; ``"rate_limit"``, a client's rate limit, answered 429; ``"throttled"``, an
  OAuth endpoint's throttle, answered 429). Sent synchronously on the refusing path: a
  receiver must be cheap (count it, don't write).
* :data:`admin_dashboard` — ``sender=None, since=…, until=…, panels=[…]`` while the admin
  dashboard (:mod:`mcp_oauth.admin.dashboard`) is built: a receiver appends a panel, a dict
  ``{"id": str, "title": str, "figures": [(label, value), ...], "ratio": (part, whole) or None,
  "ratio_label": str}``, from bounded queries over ``since``..``until``. The ``elicitation`` app
  adds its completion rate this way (mcp_oauth never imports it).
* :data:`shared_secrets` — ``sender=None, secrets={…}`` while :mod:`mcp_oauth.management.fleet` lists the
  secrets every host of a deployment must share: a receiver adds ``secrets[setting] = [key, …]``
  (the setting's name as a site writes it; its key ring, the primary key first; ``str`` or
  ``bytes``). The ``elicitation`` app adds ``ELICITATION["ENCRYPTION_KEYS"]`` this way.
* :data:`organization_member_removed` — ``sender=Organization, organization=…, user=…`` once the
  transaction that removed ``user`` from ``organization`` has committed (a deleted
  ``OrganizationMembership``, or a site's call of
  :func:`mcp_oauth.authorization_server.user_data.memberships.remove_member`), after the user's
  tokens, consents, sessions and Tasks of the organization were revoked, ended or cancelled. The
  ``elicitation`` app cancels the user's pending elicitations of the organization and removes the
  third-party connections made for it alone.
* :data:`organization_membership_lost` — ``sender=Organization, organization=…, user=…`` when a
  token of ``user`` acting for ``organization`` was refused because the adapter
  (``organization_memberships``) no longer lists that membership: a site that maps its own
  tenant model ended it without telling the apps. Sent on the refusing request's path (a thread,
  never the event loop): the receiver of :mod:`mcp_oauth.authorization_server.user_data.memberships`
  queues the removal (``mcp_oauth.organizations.reconcile_member``), which asks the adapter again
  and takes back what the user holds for the organization when it still does not list it.
* :data:`skill_changed` — ``sender=Skill, skill=…`` when an admin skill's files were saved or
  deleted (``Skill.refresh_manifest()``, its ``version`` raised or not) or the
  skill itself was saved or deleted. The Skills extension answers with one
  ``notifications/resources/list_changed`` per transaction, after it commits, to live sessions and
  2026-07-28 listen streams (a client refreshes its skills with ``skills/list``).
"""

from __future__ import annotations

from django.dispatch import Signal

mcp_session_started = Signal()
mcp_session_ended = Signal()
tool_called = Signal()
authorization_code_replayed = Signal()
client_response_received = Signal()
user_grants_revoked = Signal()
task_created = Signal()
task_finished = Signal()
user_data_export = Signal()
user_data_erase = Signal()
request_shed = Signal()
admin_dashboard = Signal()
shared_secrets = Signal()
organization_member_removed = Signal()
organization_membership_lost = Signal()
skill_changed = Signal()
