"""The cost of the DPoP proof check on ``tools/call``: the same server, Bearer vs DPoP, side by side.

One process drives ``project.asgi.application`` (the lean lane) with 2026-07-28 stateless
``tools/call`` requests of the ``echo`` tool, against PostgreSQL and Redis as
``bench/prod_topology.py`` configures them, with two tokens of the same user and client: a
bearer token, and a DPoP-bound one (``cnf.jkt`` of an ES256 key) sent with a fresh proof per
request. The proofs are signed before the clock starts (client-side work is not the server's).

Default: CPU time per call for both, in alternating rounds (``--rounds``), and their ratio.
``--callgrind``: instructions per call for both, counted by callgrind (``valgrind``) as in
``bench/count_call.py``: ``(I(N2) - I(N1)) / (N2 - N1)`` for each kind, every run signing the
same number of proofs so that their cost cancels out.

    .venv/bin/python bench/dpop_call.py [--calls 2000] [--rounds 3] [--concurrency 16]
    .venv/bin/python bench/dpop_call.py --callgrind [--n1 160] [--n2 800]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import asgi_post  # noqa: E402
from bench.prod_topology import BASE, django_setup, fixtures, modern_call_body, modern_headers  # noqa: E402
from tests.support.dpop_helpers import DPoPKey  # noqa: E402

MCP_URL = BASE + "/mcp"


def tokens(fx: dict) -> tuple[str, str, DPoPKey]:
    """``(bearer token, DPoP-bound token, its key)`` of the bench user and client."""
    from datetime import timedelta

    from django.utils import timezone

    from mcp_oauth.dpop.bindings import bind_tokens

    bearer, _ = fx["mint"]()
    bound, _ = fx["mint"]()
    key = DPoPKey("ES256")
    bind_tokens(key.thumbprint, [(bound, "access_token", timezone.now() + timedelta(hours=1))])
    return bearer, bound, key


def headers_for(kind: str, bearer: str, bound: str, proof: str | None) -> dict[str, str]:
    if kind == "bearer":
        return modern_headers(bearer)
    return {**modern_headers(bound), "Authorization": f"DPoP {bound}", "DPoP": proof or ""}


async def drive(app, kind: str, bearer: str, bound: str, proofs: list[str], calls: int, concurrency: int) -> float:
    """CPU seconds of ``calls`` calls (``concurrency`` at a time), every answer checked."""
    per = calls // concurrency
    queue = iter(proofs)

    async def worker() -> None:
        for n in range(per):
            proof = next(queue) if kind == "dpop" else None
            status, _, body = await asgi_post(app, "/mcp", headers_for(kind, bearer, bound, proof), modern_call_body(n))
            assert status == 200, (kind, status, body[:300])

    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.process_time() - cpu


def sign(key: DPoPKey, token: str, n: int) -> list[str]:
    return [key.proof("POST", MCP_URL, token) for _ in range(n)]


def side_by_side(args) -> None:
    django_setup()
    bearer, bound, key = tokens(fixtures())
    from project.asgi import application

    async def run() -> None:
        warm = sign(key, bound, 100)
        await drive(application, "bearer", bearer, bound, [], 96, 16)
        await drive(application, "dpop", bearer, bound, warm, 96, 16)
        per_call: dict[str, list[float]] = {"bearer": [], "dpop": []}
        for _ in range(args.rounds):
            for kind in ("bearer", "dpop"):
                proofs = sign(key, bound, args.calls) if kind == "dpop" else []
                calls = args.calls // args.concurrency * args.concurrency
                cpu = await drive(application, kind, bearer, bound, proofs, args.calls, args.concurrency)
                per_call[kind].append(1e6 * cpu / calls)
        b, d = min(per_call["bearer"]), min(per_call["dpop"])
        print(
            f"\n== tools/call (2026-07-28, lean lane, Redis + PostgreSQL), CPU per call, best of {args.rounds} rounds"
        )
        print(f"Bearer   {b:8.0f} µs   rounds: {', '.join(f'{v:.0f}' for v in per_call['bearer'])}")
        print(f"DPoP     {d:8.0f} µs   rounds: {', '.join(f'{v:.0f}' for v in per_call['dpop'])}")
        print(f"DPoP / Bearer {d / b:.3f} x   (+{d - b:.0f} µs per call)")

    asyncio.run(run())


def child(args) -> None:
    """One callgrind run: ``--calls`` calls of ``--only`` after signing ``--sign`` proofs."""
    django_setup()
    bearer, bound, key = tokens(fixtures())
    from project.asgi import application

    proofs = sign(key, bound, args.sign)

    async def run() -> None:
        await drive(application, "bearer", bearer, bound, [], 48, 16)
        await drive(application, "dpop", bearer, bound, sign(key, bound, 48), 48, 16)
        await drive(application, args.only, bearer, bound, proofs, args.calls, 16)

    asyncio.run(run())


def callgrind(args) -> None:
    def count(kind: str, calls: int) -> int:
        with tempfile.TemporaryDirectory() as folder:
            argv = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/out", sys.executable, __file__]
            argv += ["--child", "--only", kind, "--calls", str(calls), "--sign", str(args.n2)]
            env = {**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": str(ROOT)}
            run = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, check=False)
            found = re.search(r"Collected : (\d+)", run.stderr)
            if run.returncode != 0 or found is None:
                raise RuntimeError(f"callgrind run failed ({kind}, {calls}): {run.stderr[-2000:]}")
            return int(found.group(1))

    per_call = {
        kind: (count(kind, args.n2) - count(kind, args.n1)) / (args.n2 - args.n1) for kind in ("bearer", "dpop")
    }
    b, d = per_call["bearer"], per_call["dpop"]
    print(f"\n== instructions per warm tools/call (callgrind; ({args.n2} - {args.n1} calls) / {args.n2 - args.n1})")
    print(f"Bearer {b:14,.0f}\nDPoP   {d:14,.0f}\nDPoP / Bearer {d / b:.3f} x   (+{d - b:,.0f} instructions per call)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--n1", type=int, default=160)
    parser.add_argument("--n2", type=int, default=800)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only", choices=["bearer", "dpop"], help=argparse.SUPPRESS)
    parser.add_argument("--sign", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
    elif args.callgrind:
        callgrind(args)
    else:
        side_by_side(args)


if __name__ == "__main__":
    main()
