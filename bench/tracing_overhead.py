"""What tracing costs on the hot path: ``tools/call`` with tracing off (``ours``) and on
(``ours-traced``, every request sampled, spans and metrics exported over OTLP/HTTP in batches),
side by side with the official SDK server, in one interleaved run of ``bench/prod_topology.py
--only compare``.

Runs an OTLP/HTTP sink on loopback (it decodes each ``ExportTraceServiceRequest`` and counts the
spans: the exported spans are real) and serves ``bench/traced_asgi.py`` as the extra server.
Not a test: nothing is asserted. Extra arguments go to ``prod_topology.py``::

    DATABASE_URL=postgres://… REDIS_URL=redis://127.0.0.1:6379/4 \\
        .venv/bin/python bench/tracing_overhead.py --seconds 5 --rounds 3
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

ROOT = Path(__file__).resolve().parent.parent
counts = {"spans": 0, "trace_requests": 0, "metric_requests": 0}


class Sink(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path == "/v1/traces":
            request = ExportTraceServiceRequest.FromString(body)
            counts["trace_requests"] += 1
            counts["spans"] += sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
        elif self.path == "/v1/metrics":
            counts["metric_requests"] += 1
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "BENCH_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "BENCH_EXTRA_APP": "ours-traced=bench.traced_asgi:application",
    }
    argv = [sys.executable, str(ROOT / "bench" / "prod_topology.py"), "--only", "compare"]
    argv += ["--servers", "sdk-stateful,ours-traced"] + sys.argv[1:]
    code = subprocess.call(argv, cwd=ROOT, env=env)
    server.shutdown()
    print(
        f"OTLP sink: {counts['spans']} spans in {counts['trace_requests']} export requests, "
        f"{counts['metric_requests']} metric export requests"
    )
    sys.exit(code)


if __name__ == "__main__":
    main()
