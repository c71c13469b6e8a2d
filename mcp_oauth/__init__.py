"""django-mcp-authz: an MCP resource server plus its OAuth 2.1 authorization server for Django."""

__version__ = "0.1.0"
