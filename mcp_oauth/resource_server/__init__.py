"""The resource-server side: metadata (RFC 9728), bearer authentication and challenges."""
