"""Streamable HTTP transport (MCP 2025-11-25 "Transports"): endpoint, JSON-RPC dispatch, sessions."""
