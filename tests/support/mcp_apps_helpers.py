"""Requests of the MCP Apps tests (``io.modelcontextprotocol/ui``, SEP-1865) to the reference site's
notes view (``project/mcp_tools.py``: ``ui://project/notes_app``), stateless 2026-07-28 era."""

from __future__ import annotations

import json

#: The protocol version of the requests.
V = "2026-07-28"
#: The notes view's resource.
URI = "ui://project/notes_app"
#: The extension's MIME type of a view (SEP-1865).
MIME = "text/html;profile=mcp-app"
EXT = "io.modelcontextprotocol/ui"
#: The client capabilities of a client that declared the extension.
APPS_CAPS = {"extensions": {EXT: {"mimeTypes": [MIME]}}}


def rpc(client, token, method, params=None, caps=None, path="/mcp"):
    """One stateless 2026-07-28 request; the JSON-RPC response object."""
    params = dict(params or {})
    params["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps if caps is not None else {},
        "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
    }
    headers = {
        "Authorization": f"Bearer {token}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
    }
    if method == "tools/call":
        headers["Mcp-Name"] = params["name"]
    elif method == "resources/read":
        headers["Mcp-Name"] = params["uri"]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    response = client.post(path, json.dumps(message), content_type="application/json", headers=headers)
    assert response.status_code in (200, 400, 403), response.content
    return response.json()


def tools_by_name(client, token, caps=None) -> dict:
    return {tool["name"]: tool for tool in rpc(client, token, "tools/list", caps=caps)["result"]["tools"]}


def read(client, token, caps=None) -> dict:
    """The one contents entry of ``resources/read`` of the notes view."""
    result = rpc(client, token, "resources/read", {"uri": URI}, caps=caps)["result"]
    assert len(result["contents"]) == 1
    return result["contents"][0]
