"""Benchmark: cost of the MCP endpoint's bearer check and JSON-RPC dispatch.

Runs in one process against the reference project (Django test client, no network),
on a throw-away SQLite database (or DATABASE_URL). Prints requests per second and
per-request times for:

  baseline   GET of the protected-resource metadata (no token, one query)
  ping       POST /mcp ping with a bearer token (token lookup + session lookup)
  tools/call POST /mcp tools/call whoami (plus the tool run through sync_to_async)

and the ratio of each to the baseline. Usage:

    .venv/bin/python bench/bench_mcp.py [--requests 500]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import bench_token, run_cases, setup_django


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=500)
    args = parser.parse_args()

    setup_django()
    from django.test import Client

    user, app, resource, raw = bench_token()

    client = Client()
    headers = {
        "HTTP_AUTHORIZATION": f"Bearer {raw}",
        "HTTP_ACCEPT": "application/json, text/event-stream",
        "HTTP_MCP_PROTOCOL_VERSION": "2025-11-25",
    }
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
        **headers,
    )
    assert init.status_code == 200, init.content
    headers["HTTP_MCP_SESSION_ID"] = init["Mcp-Session-Id"]

    def post(method, params=None):
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}})
        response = client.post("/mcp", body, content_type="application/json", **headers)
        assert response.status_code == 200, response.content
        b"".join(response.streaming_content) if response.streaming else response.content

    cases = {
        "baseline": lambda: client.get("/.well-known/oauth-protected-resource/mcp"),
        "ping": lambda: post("ping"),
        "tools/call": lambda: post("tools/call", {"name": "whoami", "arguments": {}}),
    }
    if os.environ.get("BENCH_PROFILE"):
        import cProfile
        import pstats

        cProfile.runctx(
            "for _ in range(200): cases[os.environ['BENCH_PROFILE']]()", globals(), locals(), "/tmp/bench.prof"
        )
        pstats.Stats("/tmp/bench.prof").sort_stats("cumulative").print_stats(25)
        return
    run_cases(cases, args.requests, warmup=20)


if __name__ == "__main__":
    main()
