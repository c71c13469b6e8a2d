"""What a crash costs the tool-call audit trail: ``kill -9`` of a worker under load.

Starts our server (gunicorn, one uvicorn worker, PostgreSQL ``DATABASE_URL``, Redis ``REDIS_URL``)
with the trail on, sends 2026-07-28 ``tools/call`` requests on ``--connections`` keep-alive
connections for ``--seconds``, then sends ``SIGKILL`` to the worker while the load runs. Every
call answered 200 before the kill is a call the trail should hold; the rows stored for the run's
own client are counted once the master's replacement worker is up. Prints calls answered, rows
stored, rows lost, and the loss as time at the measured rate (the window the crash cost).
``--rounds`` repeats it (fresh client each round). Not a test: nothing is asserted.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/<db> REDIS_URL=redis://127.0.0.1:6379/<n> \\
        .venv/bin/python bench/audit_crash.py [--seconds 3] [--connections 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.loadgen import Connection, Tally, timed
from bench.prod_topology import (
    django_setup,
    fixtures,
    free_port,
    gunicorn,
    modern_call_body,
    modern_headers,
    ok_call,
)


async def load(port: int, token: str, seconds: float, connections: int, answered: list[float]) -> None:
    """Calls until ``seconds`` pass or the connection breaks; ``answered``: when each 200 came."""

    async def loop() -> None:
        conn = Connection("127.0.0.1", port)
        tally, n = Tally(), 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            n += 1
            response = await timed(conn, tally, "POST", "/mcp", modern_headers(token), modern_call_body(n))
            if response is None:
                return  # the worker died under us
            if ok_call(response, n, modern=True):
                answered.append(time.monotonic())
        await conn.close()

    await asyncio.gather(*(loop() for _ in range(connections)))


def worker_pid(server) -> int:
    children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children").read_text().split()
    return int(children[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=3.0, help="load before the kill")
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    django_setup()
    fx = fixtures()
    from mcp_oauth.models import ToolCallRecord
    from mcp_oauth.settings import mcp_oauth_settings

    port = free_port()
    server = gunicorn("ours", 1, port).wait_ready()
    time.sleep(2)
    print(
        f"flush every {mcp_oauth_settings.TOOL_CALL_AUDIT_FLUSH_MILLISECONDS} ms or "
        f"{mcp_oauth_settings.TOOL_CALL_AUDIT_BATCH_SIZE} rows; {options.connections} connections"
    )
    try:
        for round_ in range(1, options.rounds + 1):
            from oauth2_provider.models import get_application_model

            app = get_application_model().objects.create(
                name=f"bench-crash-{round_}",
                client_type="public",
                authorization_grant_type="authorization-code",
                redirect_uris="http://127.0.0.1/callback",
            )
            token, _ = fx["mint"](app=app)
            answered: list[float] = []
            victim = worker_pid(server)

            async def run(victim: int = victim, token: str = token, answered: list[float] = answered) -> float:
                task = asyncio.create_task(load(port, token, options.seconds + 30, options.connections, answered))
                await asyncio.sleep(options.seconds)
                os.kill(victim, signal.SIGKILL)
                killed = time.monotonic()
                await asyncio.wait_for(task, 60)
                return killed

            killed = asyncio.run(run())
            before = [t for t in answered if t <= killed]
            rate = len(before) / options.seconds
            # the master starts a new worker; give it time, the dead one wrote all it ever will
            time.sleep(3)
            stored = ToolCallRecord.objects.filter(client_id=app.client_id).count()
            lost = len(answered) - stored
            print(
                f"round {round_}: answered {len(answered)} ({rate:,.0f}/s), stored {stored}, lost {lost} "
                f"= {1000 * lost / rate if rate else 0:.0f} ms of calls"
            )
            ToolCallRecord.objects.filter(client_id=app.client_id).delete()
            app.delete()
            for _ in range(60):  # the replacement worker
                try:
                    if worker_pid(server) != victim:
                        break
                except (IndexError, OSError):
                    pass
                time.sleep(0.5)
            time.sleep(3)
    finally:
        server.stop() if hasattr(server, "stop") else os.killpg(server.process.pid, signal.SIGTERM)


if __name__ == "__main__":
    main()
