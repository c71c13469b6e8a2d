"""RFC 8693 OAuth 2.0 Token Exchange: down-scoping and delegation to another protected resource of this server."""
