"""The MCP Tasks extension (``io.modelcontextprotocol/tasks``, SEP-2663) on the database and Celery.

A tool opts in with ``@tool(task=...)`` (:class:`TaskPolicy`, or ``"always"`` / ``"optional"``);
a 2026-07-28 request that declares the extension in its ``_meta`` client capabilities gets a
``CreateTaskResult`` (the row is committed first), the tool runs on an executor
(:mod:`.jobs`: a Celery worker, or a thread), and the client polls ``tasks/get``, answers
``inputRequests`` with ``tasks/update`` and cancels with ``tasks/cancel`` (:mod:`.methods`).
The rows are :class:`mcp_oauth.models.McpTask`; a reconciler keeps none stuck.

Modules: :mod:`.policy` (what a tool declares), :mod:`.store` (rows, owner binding, wire shape),
:mod:`.runner` (running one task), :mod:`.jobs` (executors, reconciler), :mod:`.methods`
(JSON-RPC methods and the ``tools/call`` hook).
"""

from mcp_oauth.mcp_server.mcp_tasks.policy import ALWAYS, NEVER, OPTIONAL, TaskPolicy

__all__ = ["ALWAYS", "NEVER", "OPTIONAL", "TaskPolicy"]
