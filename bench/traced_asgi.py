"""The reference site with tracing on (bench only): ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set from
``BENCH_OTLP_ENDPOINT`` before Django starts, so ``MCP_OAUTH["TRACING"] = "auto"`` turns it on.

``bench/tracing_overhead.py`` serves it next to ``ours`` (tracing off) in one interleaved
``bench/prod_topology.py --only compare`` run: ours-traced ÷ ours is what tracing costs.
"""

from __future__ import annotations

import os

os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = os.environ["BENCH_OTLP_ENDPOINT"]
os.environ.setdefault("OTEL_SERVICE_NAME", "mcp-oauth-bench")

from project.asgi import application

__all__ = ["application"]
