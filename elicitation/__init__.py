"""Elicitation for MCP tools (MCP 2025-11-25 "Client Features / Elicitation", SEP-1036).

* Form mode (in band): :func:`elicitation.api.elicit_form` asks the user, through the client,
  for a few primitive values described by a restricted JSON Schema (:mod:`elicitation.form`)
  and validates the answer.
* URL mode (out of band): :mod:`elicitation.url` sends the user to this site's own pages
  (:mod:`elicitation.views`) to connect a third-party account (:mod:`elicitation.providers`,
  tokens encrypted by :mod:`elicitation.crypto`), to type a secret, or to finish an external
  interaction (payments: :func:`elicitation.url.complete_elicitation`); the client is told with
  ``notifications/elicitation/complete`` through the session outbox (:mod:`elicitation.tasks`).

Settings: the ``ELICITATION`` namespace (:mod:`elicitation.settings`). URLs:
``path("elicitation/", include("elicitation.urls"))``.

This app builds on :mod:`mcp_oauth` (its ``ToolContext``, ``McpSession``, outbox, audit log);
``mcp_oauth`` never imports it.
"""
