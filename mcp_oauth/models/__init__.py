"""Models of the app, one module per subject; all importable from ``mcp_oauth.models``."""

from .audit import AuditEvent
from .core import (
    ClientProfile,
    McpSession,
    McpSessionEvent,
    ProtectedResource,
    RedeemedAuthorizationCode,
    new_session_id,
)

__all__ = [
    "AuditEvent",
    "ClientProfile",
    "McpSession",
    "McpSessionEvent",
    "ProtectedResource",
    "RedeemedAuthorizationCode",
    "new_session_id",
]
