"""What one refusal past the in-flight bound costs the server: CPU per refused request, with the
bound at 0 (every ``tools/call`` refused), refused by the ASGI lane (``uvicorn_worker.UvicornWorker``)
and by the HTTP protocol (:mod:`mcp_oauth.mcp_server.transport.uvicorn_shed`), interleaved, each
on one gunicorn worker; and, for scale, the CPU of one successful call with the bound off.

Closed loop on ``--connections`` keep-alive connections for ``--seconds`` per round, ``--rounds``
rounds; the load generator's own CPU is printed too. Not a test: nothing is asserted::

    DATABASE_URL=postgres://… REDIS_URL=redis://127.0.0.1:6379/9 \\
        .venv/bin/python bench/shed_cost.py [--seconds 5] [--rounds 3] [--connections 32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.openloop import closed_loop  # noqa: E402
from bench.overload import run  # noqa: E402
from bench.prod_topology import BASE, django_setup, fixtures, free_port, gunicorn  # noqa: E402

LANE = "uvicorn_worker.UvicornWorker"
PROTOCOL = "mcp_oauth.mcp_server.transport.uvicorn_shed.UvicornWorker"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    django_setup()
    token, _ = fixtures()["mint"]()
    servers = {}
    for name, worker, bound in (
        ("refused by the lane", LANE, "0"),
        ("refused by the protocol", PROTOCOL, "0"),
        ("served (bound off)", PROTOCOL, "none"),
    ):
        servers[name] = gunicorn(name, 1, free_port(), worker=worker, MCP_MAX_IN_FLIGHT=bound, MCP_BASE_URL=BASE)
    totals = {name: [0, 0.0, 0.0] for name in servers}  # answers, server CPU, generator CPU
    statuses: dict[str, dict] = {name: {} for name in servers}
    try:
        for server in servers.values():
            server.wait_ready()
        for round_ in range(args.rounds):
            names = list(servers)
            for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
                server = servers[name]
                used, mine = server.cpu(), time.process_time()
                result = run(closed_loop(server.port, token, args.connections, args.seconds))
                totals[name][0] += sum(result.statuses.values())
                totals[name][1] += server.cpu() - used
                totals[name][2] += time.process_time() - mine
                for status, count in result.statuses.items():
                    statuses[name][status] = statuses[name].get(status, 0) + count
    finally:
        for server in servers.values():
            server.stop()
    seconds = args.seconds * args.rounds
    for name, (answers, cpu, generator) in totals.items():
        print(
            f"{name:24} {answers / seconds:7.0f} answers/s  server {1e6 * cpu / answers:6.0f} us CPU each  "
            f"generator {1e6 * generator / answers:6.0f} us CPU each  statuses {statuses[name]}"
        )


if __name__ == "__main__":
    main()
