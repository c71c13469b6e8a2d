"""Client authentication: secrets, private_key_jwt (RFC 7523 assertions), key sets, introspection policy."""
