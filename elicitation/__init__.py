"""Elicitation for MCP tools (MCP 2025-11-25 and 2026-07-28 "Client Features / Elicitation", SEP-1036).

A tool body is written once and works in both protocol eras (:mod:`elicitation.api`):

* Form mode (in band): :func:`elicitation.api.elicit_form` asks the user, through the client,
  for a few primitive values described by a restricted JSON Schema (:mod:`elicitation.form`)
  and validates the answer.
* URL mode (out of band): :func:`~elicitation.api.require_connection`,
  :func:`~elicitation.api.require_secret` and :func:`~elicitation.api.elicit_url` send the user to
  this site's own pages (:mod:`elicitation.views`) to connect a third-party account
  (:mod:`elicitation.providers`, tokens encrypted by :mod:`elicitation.crypto`), to type a
  secret, or to finish an external interaction (payments:
  :func:`elicitation.service.complete_elicitation`).

In a 2025-11-25 session the client is asked live (``elicitation/create``, ``-32042``) and told of
completions with ``notifications/elicitation/complete`` through the session outbox (written by
the completing transaction, :func:`elicitation.service.finish_elicitation`; :mod:`elicitation.tasks`
as the safety net); in a 2026-07-28 request the tool's result is ``input_required`` and
the client's retry carries the answer (:mod:`mcp_oauth.mcp_server.transport.input_required`).

Modules: :mod:`~elicitation.api` (what tools call), :mod:`~elicitation.service` (the rows: create,
finish, complete), :mod:`~elicitation.protocol` (capability checks, wire shapes),
:mod:`~elicitation.url_mode` (the URL-mode names re-exported for existing imports).

Settings: the ``ELICITATION`` namespace (:mod:`elicitation.settings`). URLs:
``path("elicitation/", include("elicitation.urls"))``.

This app builds on :mod:`mcp_oauth` (its ``ToolContext``, ``McpSession``, outbox, audit log);
``mcp_oauth`` never imports it.
"""
