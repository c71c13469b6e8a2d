"""The reference site with every observability feature on (bench only): tracing exported over
OTLP/HTTP to ``BENCH_OTLP_ENDPOINT`` (sampler from ``OTEL_TRACES_SAMPLER`` /
``OTEL_TRACES_SAMPLER_ARG`` when set, else every request), the Prometheus metrics in multiprocess
mode, and the tool-call audit trail.

``bench/observability_overhead.py`` serves it next to ``ours`` (all of them off) in one
interleaved ``bench/prod_topology.py --only compare`` run.
"""

from __future__ import annotations

import os
import tempfile

os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = os.environ["BENCH_OTLP_ENDPOINT"]
os.environ.setdefault("OTEL_SERVICE_NAME", "mcp-oauth-bench")
os.environ["MCP_METRICS"] = "1"
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", tempfile.mkdtemp(prefix="bench-metrics-"))
os.environ["MCP_TOOL_CALL_AUDIT"] = "1"

from project.asgi import application

__all__ = ["application"]
