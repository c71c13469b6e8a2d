"""Enterprise identity: ID-JAG (RFC 7523 JWT bearer grant), issuers and their users."""
