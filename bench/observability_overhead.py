"""What tracing, metrics and the tool-call audit trail cost together on the hot path: ``tools/call``
with all of them off (``ours``, ``MCP_TOOL_CALL_AUDIT=0``) and all on (``ours-observed``:
``bench/observed_asgi.py``), side by side with the official SDK server (stateful and stateless:
both protocol eras), in one interleaved run of ``bench/prod_topology.py --only compare``.

Runs the OTLP/HTTP sink of ``bench/tracing_overhead.py`` on loopback (the spans are really
exported and decoded). ``--sampler-ratio R`` samples a share R of the traces
(``parentbased_traceidratio``); by default every request is traced. Extra arguments go to
``prod_topology.py`` (e.g. ``--baseline DIR`` adds today's tree, ``--seconds``, ``--rounds``).
``--sdk-traced`` adds ``sdk-traced``: the official SDK server with its own OpenTelemetry server
spans (one per request) exported in batches to the same sink, the fair baseline for tracing (the
SDK has no metrics or audit trail of its own).
Not a test: nothing is asserted::

    DATABASE_URL=postgres://… REDIS_URL=redis://127.0.0.1:6379/9 \\
        .venv/bin/python bench/observability_overhead.py --seconds 5 --rounds 3 [--sdk-traced] [--sampler-ratio 0.1]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.tracing_overhead import Sink, counts  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--sampler-ratio", type=float, default=None)
    parser.add_argument(
        "--sdk-traced",
        action="store_true",
        help="also serve the official SDK with its own spans exported to the same sink (sdk-traced)",
    )
    args, rest = parser.parse_known_args()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {
        **os.environ,
        "MCP_TOOL_CALL_AUDIT": "0",  # ours: everything off; observed_asgi turns all on for itself
        "BENCH_OTLP_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}",
        "BENCH_EXTRA_APP": "ours-observed=bench.observed_asgi:application",
    }
    if args.sampler_ratio is not None:
        env["OTEL_TRACES_SAMPLER"] = "parentbased_traceidratio"
        env["OTEL_TRACES_SAMPLER_ARG"] = str(args.sampler_ratio)
    argv = [sys.executable, str(ROOT / "bench" / "prod_topology.py"), "--only", "compare"]
    servers = "sdk-stateful,ours-observed"
    if args.sdk_traced:
        env["BENCH_SDK_OTLP_ENDPOINT"] = env["BENCH_OTLP_ENDPOINT"]
        servers += ",sdk-traced"
    argv += ["--servers", servers] + rest
    code = subprocess.call(argv, cwd=ROOT, env=env)
    server.shutdown()
    print(
        f"OTLP sink: {counts['spans']} spans in {counts['trace_requests']} export requests, "
        f"{counts['metric_requests']} metric export requests"
    )
    sys.exit(code)


if __name__ == "__main__":
    main()
