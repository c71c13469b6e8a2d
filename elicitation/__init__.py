"""Elicitation for MCP tools (MCP 2025-11-25 "Client Features / Elicitation").

Form mode (in band): :func:`elicitation.api.elicit_form` asks the user, through the
client, for a few primitive values described by a restricted JSON Schema
(:mod:`elicitation.form`) and validates the answer. URL mode (SEP-1036) is not
implemented yet.

This app builds on :mod:`mcp_oauth` (its ``ToolContext`` and ``McpSession``);
``mcp_oauth`` never imports it.
"""
