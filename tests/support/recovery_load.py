"""A dependency cut under load, measured from the clients' side (tests/topology/test_recovery_cut.py,
bench/recovery.py).

:func:`run_cut` drives ``clients`` concurrent MCP clients calling ``tools/call`` (``echo``) back to
back against a running site, each other request a read of the protected-resource metadata (a
request that reads the database: a tool call on a cached token may not) — half in 2025-11-25 sessions, half as 2026-07-28 stateless requests —
and a readiness probe every 100 ms, while a :class:`tests.support.tcp_forwarder.TcpForwarder` between the
site and a dependency is stopped for ``cut_seconds`` and started again. Every answer is recorded
with its time; :class:`CutFigures` sums them up relative to the moment the forwarder came back.

An answer is an error unless it is HTTP 200 with the echo's result (JSON-RPC error and
``isError`` results count as errors). Clients time out a request after 15 s.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx2

from tests.support.tcp_forwarder import TcpForwarder

__all__ = ["Answer", "CutFigures", "idle_cut", "run_cut"]

ACCEPT = "application/json, text/event-stream"
MODERN_VERSION = "2026-07-28"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "recovery", "version": "1"},
}


@dataclass
class Answer:
    """One request's outcome: ``at`` seconds on the monotonic clock (when the answer came)."""

    at: float
    ok: bool
    status: int  # 0: no HTTP answer (connection refused, reset, timeout)
    retry_after: str | None
    detail: str = ""
    sent: float = 0.0  # when the request was sent


@dataclass
class CutFigures:
    """Figures of one run (see :func:`run_cut`). Times in seconds relative to the forwarder's return."""

    cut_at: float
    back_at: float
    calls: list[Answer] = field(default_factory=list)
    probes: list[Answer] = field(default_factory=list)

    def errors(self, start: float, end: float | None = None) -> list[Answer]:
        """Failed calls answered in ``[back_at + start, back_at + end)``."""
        low = self.back_at + start
        high = float("inf") if end is None else self.back_at + end
        return [a for a in self.calls if not a.ok and low <= a.at < high]

    @property
    def errors_during(self) -> list[Answer]:
        """Failed calls sent before the forwarder came back and answered after the cut (a request
        that waited for the pool during the cut may be answered just after the return)."""
        return [a for a in self.calls if not a.ok and a.at >= self.cut_at and a.sent < self.back_at]

    @property
    def errors_sent_after(self) -> list[Answer]:
        """Failed calls sent after the forwarder came back."""
        return [a for a in self.calls if not a.ok and a.sent >= self.back_at]

    @property
    def first_success_after(self) -> float | None:
        """Seconds from the return to the first successful call answered after it."""
        after = [a.at for a in self.calls if a.ok and a.at >= self.back_at]
        return min(after) - self.back_at if after else None

    def readiness_flaps(self, after: float = 0.0) -> int:
        """Changes of the readiness answer (200 <-> other) among probes answered after ``back_at + after``."""
        states = [a.status == 200 for a in self.probes if a.at >= self.back_at + after]
        return sum(1 for x, y in zip(states, states[1:], strict=False) if x != y)

    def readiness_steady_from(self) -> float | None:
        """Seconds after the return from which every probe answered 200 (None: never steady)."""
        last_bad = max((a.at for a in self.probes if a.status != 200), default=None)
        if last_bad is None or last_bad < self.back_at:
            return 0.0
        if self.probes and self.probes[-1].status != 200:
            return None
        return last_bad - self.back_at

    def summary(self) -> dict[str, Any]:
        during = self.errors_during
        statuses: dict[str, int] = {}
        for answer in during:
            statuses[str(answer.status)] = statuses.get(str(answer.status), 0) + 1
        return {
            "calls": len(self.calls),
            "ok": sum(a.ok for a in self.calls),
            "errors_during_cut": len(during),
            "errors_during_cut_by_status": statuses,
            "errors_during_cut_without_retry_after": sum(
                1 for a in during if a.status == 503 and a.retry_after is None
            ),
            "errors_sent_after_return": len(self.errors_sent_after),
            "errors_answered_0_to_5s_after": len(self.errors(0, 5)),
            "errors_answered_after_5s": len(self.errors(5)),
            "first_success_after_s": None if self.first_success_after is None else round(self.first_success_after, 3),
            "readiness_probes": len(self.probes),
            "readiness_flaps_after_return": self.readiness_flaps(),
            "readiness_steady_200_from_s": self.readiness_steady_from(),
        }


def _headers(token: str, modern: bool, session: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}", "Accept": ACCEPT, "Content-Type": "application/json"}
    if modern:
        headers.update({"MCP-Protocol-Version": MODERN_VERSION, "Mcp-Method": "tools/call", "Mcp-Name": "echo"})
    elif session:
        headers.update({"Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"})
    return headers


def _call(n: int, modern: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "echo", "arguments": {"text": "hello"}}
    if modern:
        params["_meta"] = MODERN_META
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


def _messages(response: httpx2.Response) -> list[dict[str, Any]]:
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return [
            json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()
        ]
    return [response.json()]


def _judge(response: httpx2.Response, n: int) -> tuple[bool, str]:
    if response.status_code != 200:
        return False, response.text[:200]
    try:
        messages = _messages(response)
    except ValueError:
        return False, "malformed body"
    for message in messages:
        if message.get("id") == n:
            result = message.get("result")
            if isinstance(result, dict) and not result.get("isError"):
                return True, ""
            return False, json.dumps(message)[:200]
    return False, "no answer to the call"


async def _open_session(client: httpx2.AsyncClient, url: str, token: str) -> str | None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "recovery", "version": "1"},
        },
    }
    response = await client.post(url, headers=_headers(token, False), json=init)
    session = response.headers.get("mcp-session-id")
    if response.status_code != 200 or not session:
        return None
    await client.post(
        url, headers=_headers(token, False, session), json={"jsonrpc": "2.0", "method": "notifications/initialized"}
    )
    return session


async def _client(base: str, token: str, modern: bool, stop: asyncio.Event, answers: list[Answer]) -> None:
    url = base + "/mcp"
    async with httpx2.AsyncClient(timeout=15) as client:
        session = None if modern else await _open_session(client, url, token)
        if not modern and session is None:
            raise AssertionError("initialize failed before the cut")
        n = 0
        while not stop.is_set():
            n += 1
            if n % 2 == 0:  # every other request: one that reads the database (resource metadata)
                await _metadata(client, base, answers)
                continue
            sent = time.monotonic()
            try:
                response = await client.post(url, headers=_headers(token, modern, session), json=_call(n, modern))
            except httpx2.HTTPError as exc:
                answers.append(Answer(time.monotonic(), False, 0, None, f"{type(exc).__name__}: {exc}", sent))
                await asyncio.sleep(0.1)
                continue
            ok, detail = _judge(response, n)
            retry_after = response.headers.get("retry-after")
            answers.append(Answer(time.monotonic(), ok, response.status_code, retry_after, detail, sent))
            if response.status_code == 404 and session is not None:  # the session is gone: a new one
                session = await _open_session(client, url, token)
            if not ok:
                await asyncio.sleep(0.1)  # as a client honouring a short Retry-After would, bounded


async def _metadata(client: httpx2.AsyncClient, base: str, answers: list[Answer]) -> None:
    sent = time.monotonic()
    try:
        response = await client.get(base + "/.well-known/oauth-protected-resource/mcp")
    except httpx2.HTTPError as exc:
        answers.append(Answer(time.monotonic(), False, 0, None, f"metadata: {type(exc).__name__}: {exc}", sent))
        return
    ok = response.status_code == 200 and "resource" in response.json()
    retry_after = response.headers.get("retry-after")
    answers.append(Answer(time.monotonic(), ok, response.status_code, retry_after, response.text[:200], sent))
    if not ok:
        await asyncio.sleep(0.1)


async def _probe(base: str, stop: asyncio.Event, probes: list[Answer]) -> None:
    async with httpx2.AsyncClient(timeout=5) as client:
        while not stop.is_set():
            try:
                response = await client.get(base + "/readyz")
                probes.append(
                    Answer(time.monotonic(), response.status_code == 200, response.status_code, None, response.text)
                )
            except httpx2.HTTPError as exc:
                probes.append(Answer(time.monotonic(), False, 0, None, type(exc).__name__))
            await asyncio.sleep(0.1)


async def _run(
    base: str,
    token: str,
    forwarder: TcpForwarder,
    clients: int,
    warmup: float,
    cut_seconds: float,
    after_seconds: float,
) -> CutFigures:
    stop = asyncio.Event()
    calls: list[Answer] = []
    probes: list[Answer] = []
    tasks = [asyncio.ensure_future(_client(base, token, n % 2 == 1, stop, calls)) for n in range(clients)]
    tasks.append(asyncio.ensure_future(_probe(base, stop, probes)))
    try:
        await asyncio.sleep(warmup)
        cut_at = time.monotonic()
        await asyncio.to_thread(forwarder.stop)
        await asyncio.sleep(cut_seconds)
        await asyncio.to_thread(forwarder.start)
        back_at = time.monotonic()
        await asyncio.sleep(after_seconds)
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    return CutFigures(cut_at, back_at, calls, probes)


def idle_cut(base: str, forwarder: TcpForwarder, cut_seconds: float = 5.0, settle: float = 5.0, n: int = 20) -> dict:
    """The operator's case: no load, the forwarder stopped ``cut_seconds``, started again, then
    after ``settle`` s ``n`` sequential reads of the protected-resource metadata and ``n`` readiness
    probes (the pooled connections sat idle through the cut). :returns: their status codes."""
    forwarder.stop()
    time.sleep(cut_seconds)
    forwarder.start()
    time.sleep(settle)
    with httpx2.Client(timeout=15) as client:
        metadata = [client.get(base + "/.well-known/oauth-protected-resource/mcp").status_code for _ in range(n)]
        readiness = [client.get(base + "/readyz").status_code for _ in range(n)]
    return {"metadata": metadata, "readiness": readiness}


def run_cut(
    base: str,
    token: str,
    forwarder: TcpForwarder,
    clients: int = 20,
    warmup: float = 3.0,
    cut_seconds: float = 5.0,
    after_seconds: float = 12.0,
) -> CutFigures:
    """Load for ``warmup`` s, the forwarder stopped ``cut_seconds``, then ``after_seconds`` more.
    Bounded: about ``warmup + cut_seconds + after_seconds`` seconds plus the last requests' time."""
    return asyncio.run(_run(base, token, forwarder, clients, warmup, cut_seconds, after_seconds))
