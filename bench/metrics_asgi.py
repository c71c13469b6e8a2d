"""The reference site with the Prometheus metrics on, in multiprocess mode (bench only).

``bench/prod_topology.py --only compare`` serves it next to ``ours`` (metrics off) when run with
``BENCH_EXTRA_APP=ours-metrics=bench.metrics_asgi:application``: ours-metrics ÷ ours is what
counting costs on the hot path (``mcp_tool_calls_total`` and ``mcp_request_duration_seconds``
on every ``tools/call``, in memory-mapped files as under ``make serve``). ``BENCH_REQUEST_LOG=1``
turns the JSON request log on as well (to /dev/null).
"""

from __future__ import annotations

import os
import tempfile

os.environ["MCP_METRICS"] = "1"
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="bench-metrics-"))
if os.environ.get("BENCH_REQUEST_LOG") == "1":
    os.environ["MCP_REQUEST_LOG"] = "1"

from project.asgi import application

__all__ = ["application"]

if os.environ.get("BENCH_REQUEST_LOG") == "1":
    import logging

    for handler in logging.getLogger("mcp_oauth.requests").handlers:
        handler.setStream(open(os.devnull, "w"))
