"""A Tasks-extension client written to the extension text (SEP-2663), as its own process: the
official SDKs have no client for it yet.

    python -m tests.support.task_client <mcp url> <token> <taskId>

polls ``tasks/get`` (honouring ``pollIntervalMs``; retrying while the server restarts) until the
task is terminal and prints the final ``tasks/get`` result as JSON.
"""

from __future__ import annotations

import json
import sys
import time

import httpx2

EXTENSION = "io.modelcontextprotocol/tasks"
VERSION = "2026-07-28"


def request(url: str, token: str, method: str, params: dict, caps: dict | None = None) -> httpx2.Response:
    """One 2026-07-28 request with the extension declared; ``Mcp-Name`` mirrors the taskId."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": method,
        "params": {
            **params,
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": VERSION,
                "io.modelcontextprotocol/clientCapabilities": caps
                if caps is not None
                else {"elicitation": {"form": {}}, "extensions": {EXTENSION: {}}},
            },
        },
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": VERSION,
        "Mcp-Method": method,
    }
    name = params.get("name") if method == "tools/call" else params.get("taskId")
    if name is not None:
        headers["Mcp-Name"] = name
    return httpx2.post(url, json=body, headers=headers, timeout=30)


def poll(url: str, token: str, task_id: str, timeout: float = 120.0) -> dict:
    """``tasks/get`` until completed/failed/cancelled; connection errors (a restarting server) are retried."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            response = request(url, token, "tasks/get", {"taskId": task_id})
        except httpx2.HTTPError:
            time.sleep(0.2)
            continue
        if response.status_code >= 500:
            time.sleep(0.2)
            continue
        message = response.json()
        if "error" in message:
            return message
        result = message["result"]
        if result["status"] in ("completed", "failed", "cancelled"):
            return result
        time.sleep(result.get("pollIntervalMs", 500) / 1000)
    raise TimeoutError(task_id)


if __name__ == "__main__":
    print(json.dumps(poll(sys.argv[1], sys.argv[2], sys.argv[3])))
