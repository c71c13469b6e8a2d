"""Clients: dynamic registration (RFC 7591), its limits, the client cache, the trust policy."""
