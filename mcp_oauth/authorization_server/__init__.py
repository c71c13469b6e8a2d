"""The authorization-server side: django-oauth-toolkit configured as an MCP profile, plus its gaps filled."""
