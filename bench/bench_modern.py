"""Benchmark: 2026-07-28 stateless requests next to 2025-11-25 session requests, and requestState.

Runs in one process against the reference project (Django test client, no network), on a
throw-away SQLite database (or DATABASE_URL). Prints requests per second and per-request times for:

  baseline          GET of the protected-resource metadata (no token)
  legacy tools/list POST tools/list in a 2025-11-25 session (token + session lookup)
  modern tools/list POST tools/list with the _meta envelope (token lookup, no session)
  modern whoami     POST tools/call whoami, 2026-07-28
  modern ask_name   the two requests of one form elicitation: input_required (row written,
                    requestState sealed) + retry (state opened, consumed, answer validated)

and the ratio of each to the baseline; then seal/open of one requestState alone (AES-256-GCM).
Usage:

    .venv/bin/python bench/bench_modern.py [--requests 300]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_token, run_cases, setup_django

V = "2026-07-28"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    args = parser.parse_args()

    setup_django()
    from django.test import Client

    from mcp_oauth.mcp_server.transport import request_state

    user, app, resource, raw = bench_token()

    client = Client()
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}", "HTTP_ACCEPT": "application/json, text/event-stream"}
    init = client.post(
        "/mcp",
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            }
        ),
        content_type="application/json",
        **auth,
    )
    legacy = {**auth, "HTTP_MCP_PROTOCOL_VERSION": "2025-11-25", "HTTP_MCP_SESSION_ID": init["Mcp-Session-Id"]}
    meta = {
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
    }

    def post(headers, method, params):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        response = client.post("/mcp", body, content_type="application/json", **headers)
        assert response.status_code == 200, response.content
        return json.loads(response.content)["result"]

    def modern(method, params=None, name=None):
        headers = {**auth, "HTTP_MCP_PROTOCOL_VERSION": V, "HTTP_MCP_METHOD": method}
        if name:
            headers["HTTP_MCP_NAME"] = name
        return post(headers, method, {**(params or {}), "_meta": meta})

    def ask_name():
        first = modern("tools/call", {"name": "ask_name", "arguments": {}}, "ask_name")
        done = modern(
            "tools/call",
            {
                "name": "ask_name",
                "arguments": {},
                "requestState": first["requestState"],
                "inputResponses": {"input-1": {"action": "accept", "content": {"name": "Ada"}}},
            },
            "ask_name",
        )
        assert done["content"][0]["text"] == "Hello, Ada!", done

    cases = {
        "baseline": lambda: client.get("/.well-known/oauth-protected-resource/mcp"),
        "legacy tools/list": lambda: post(legacy, "tools/list", {}),
        "modern tools/list": lambda: modern("tools/list"),
        "modern whoami": lambda: modern("tools/call", {"name": "whoami", "arguments": {}}, "whoami"),
        "modern ask_name": ask_name,
    }
    run_cases(cases, args.requests, warmup=10)

    binding = {"iss": "x", "cid": "c", "sub": "1", "res": "r", "m": "tools/call", "t": "ask_name", "ad": "0" * 64}
    payload = {"asked": {"input-1": {"kind": "form", "row": 1, "schema": "0" * 32}}, "settled": {}}
    n = 5000
    start = time.perf_counter()
    tokens = [request_state.seal_state(binding, payload) for _ in range(n)]
    sealed = time.perf_counter() - start
    start = time.perf_counter()
    for sealed_token in tokens:
        request_state.open_state(sealed_token, binding, consume=False)
    opened = time.perf_counter() - start
    print(f"requestState: {len(tokens[0])} characters; seal {sealed / n * 1e6:.1f} µs, open {opened / n * 1e6:.1f} µs")


if __name__ == "__main__":
    main()
