"""A fleet on one machine (tests/topology/test_fleet_drain.py): hosts running ``python -m
project.serve`` from copies of the project (each its own ``.local/``, as on its own machine) on
one PostgreSQL database and one Redis, behind a real nginx that runs deploy/nginx/mcp-fleet.conf
with a throw-away certificate, and clients calling ``tools/call`` through it.

* :class:`Host` — one host: started in a process group of its own (``start_new_session``), stopped
  as systemd stops a service (SIGTERM to the whole group), probed directly on its port.
* :class:`Balancer` — nginx with the shipped configuration, its upstream servers replaced by the
  hosts' loopback ports; a host marked ``down`` and nginx reloaded (the documented procedure);
  an access log with each request's upstream attempts and times (:class:`Attempt`).
* :class:`Load` — ``clients`` concurrent clients, each on its own keep-alive connection to nginx,
  calling the ``echo`` tool back to back (2026-07-28 stateless requests: any host serves any call);
  every answer recorded. A call fails unless it is HTTP 200 with the echo's result; a client does
  not retry anything.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from tests.support.https_server import shared_pki
from tests.support.recovery_load import Answer, _call, _headers, _judge

ROOT = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
FLEET_CONF = ROOT / "deploy" / "nginx" / "mcp-fleet.conf"
SHIPPED_SERVERS = ("10.0.0.11:8000", "10.0.0.12:8000")
#: The environment of this machine that is not the site's.
SYSTEM = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
#: One access log line: time, the upstream attempts, their statuses, connect and header times.
LOG_FORMAT = (
    "log_format fleet '$msec|$upstream_addr|$upstream_status|$upstream_connect_time|"
    "$upstream_header_time|$status|$request_time';"
)


@dataclass
class Host:
    """One host of the fleet (see the module docstring)."""

    name: str
    tree: Path
    port: int
    env: dict[str, str]
    log: Path
    process: subprocess.Popen | None = None
    starts: int = 0

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        self.starts += 1
        with self.log.open("a") as output:
            output.write(f"\n=== start {self.starts}\n")
            output.flush()
            self.process = subprocess.Popen(
                [sys.executable, "-m", "project.serve"],
                cwd=self.tree,
                env=self.env,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def readiness(self) -> int:
        """The host's own ``/readyz`` status (0: no answer)."""
        try:
            return httpx2.get(f"http://{self.address}/readyz", timeout=2).status_code
        except httpx2.HTTPError:
            return 0

    def wait_ready(self, timeout: float = 180) -> float:
        """Until ``/readyz`` answers 200 on the host's port; the seconds it took."""
        started = time.monotonic()
        while self.readiness() != 200:
            assert self.process is not None and self.process.poll() is None, self.output()
            assert time.monotonic() - started < timeout, self.output()
            time.sleep(0.1)
        return time.monotonic() - started

    def stop_group(self, timeout: float = 60) -> int:
        """SIGTERM to the host's process group (what systemd sends); its exit status."""
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGTERM)
        return self.process.wait(timeout=timeout)

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-6000:]


@dataclass
class Attempt:
    """One access log line: a request through nginx and the upstream attempts it made."""

    at: float
    addresses: list[str]
    statuses: list[str]
    connect_times: list[str]
    header_times: list[str]
    status: int
    request_time: float

    @classmethod
    def parse(cls, line: str) -> Attempt:
        at, addresses, statuses, connects, headers, status, request_time = line.strip().split("|")

        def items(value: str) -> list[str]:
            return [item.strip() for item in re.split(r"[,:] (?=\S)", value)] if value != "-" else []

        return cls(
            float(at),
            [a.strip() for a in addresses.split(",")] if addresses != "-" else [],
            items(statuses),
            items(connects),
            items(headers),
            int(status),
            float(request_time),
        )

    def header_time_at(self, address: str) -> float | None:
        """Seconds the attempt at ``address`` waited for the response head (None: no answer)."""
        for attempt_address, header in zip(self.addresses, self.header_times, strict=False):
            if attempt_address == address and header not in ("-", ""):
                return float(header)
        return None


@dataclass
class Balancer:
    """nginx running :data:`FLEET_CONF` in front of ``hosts`` (see the module docstring)."""

    directory: Path
    port: int
    hosts: list[Host]
    down: set[str] = field(default_factory=set)
    process: subprocess.Popen | None = None

    @property
    def public(self) -> str:
        return f"https://localhost:{self.port}"

    @property
    def access_log(self) -> Path:
        return self.directory / "access.log"

    def config_text(self) -> str:
        pki = shared_pki()
        text = FLEET_CONF.read_text()
        for shipped, host in zip(SHIPPED_SERVERS, self.hosts, strict=True):
            assert f"server {shipped} " in text, text
            flag = " down" if host.name in self.down else ""
            text = text.replace(f"server {shipped} ", f"server {host.address}{flag} ")
        replacements = {
            "listen 443 ssl;": f"listen 127.0.0.1:{self.port} ssl;",
            "server_name mcp.example.com;": "server_name localhost;",
            "/etc/ssl/mcp.example.com/fullchain.pem": str(pki.cert_file),
            "/etc/ssl/mcp.example.com/privkey.pem": str(pki.key_file),
        }
        for old, new in replacements.items():
            assert old in text, old
            text = text.replace(old, new)
        temp = "\n".join(
            f"    {name}_temp_path {self.directory / name};"
            for name in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
        )
        return (
            ("user root;\n" if os.geteuid() == 0 else "")
            + f"worker_processes 1;\npid {self.directory / 'nginx.pid'};\n"
            + f"error_log {self.directory / 'error.log'} warn;\n"
            + "events { worker_connections 512; }\n"
            + f"http {{\n    {LOG_FORMAT}\n    access_log {self.access_log} fleet;\n{temp}\n{text}\n}}\n"
        )

    def write_config(self) -> Path:
        config = self.directory / "nginx.conf"
        config.write_text(self.config_text())
        return config

    def start(self) -> None:
        config = self.write_config()
        self.process = subprocess.Popen(
            [NGINX, "-p", str(self.directory), "-c", str(config), "-g", "daemon off;"],
            stdout=subprocess.DEVNULL,
            stderr=(self.directory / "nginx.stderr").open("w"),
        )

    def reload(self) -> None:
        """``nginx -s reload`` with the current configuration (checked first, as ``nginx -t`` does)."""
        config = self.write_config()
        checked = subprocess.run(
            [NGINX, "-t", "-q", "-p", str(self.directory), "-c", str(config)], capture_output=True, text=True
        )
        assert checked.returncode == 0, checked.stderr
        assert self.process is not None
        self.process.send_signal(signal.SIGHUP)

    def mark(self, host: Host, down: bool) -> None:
        """``down`` on the host's line or not, then reload."""
        (self.down.add if down else self.down.discard)(host.name)
        self.reload()

    def attempts(self) -> list[Attempt]:
        if not self.access_log.exists():
            return []
        return [Attempt.parse(line) for line in self.access_log.read_text().splitlines() if line.strip()]

    def error_log(self) -> list[str]:
        path = self.directory / "error.log"
        return path.read_text().splitlines() if path.exists() else []

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGQUIT)  # graceful
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)


class Load:
    """``clients`` clients calling ``tools/call`` through ``public`` in a thread of their own
    until :meth:`stop`; :attr:`answers` holds every outcome (see the module docstring)."""

    def __init__(self, public: str, token: str, clients: int = 20) -> None:
        self.public, self.token, self.clients = public, token, clients
        self.answers: list[Answer] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name="fleet-load", daemon=True)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def failures(self) -> list[Answer]:
        return [answer for answer in self.answers if not answer.ok]

    def answered_since(self, moment: float) -> int:
        return sum(1 for answer in self.answers if answer.at >= moment)

    async def _run(self) -> None:
        await asyncio.gather(*(self._client() for _ in range(self.clients)))

    async def _client(self) -> None:
        url = self.public + "/mcp"
        limits = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
        async with httpx2.AsyncClient(verify=str(shared_pki().ca_file), timeout=30, limits=limits) as client:
            n = 0
            while not self._stop.is_set():
                n += 1
                sent = time.monotonic()
                try:
                    response = await client.post(url, headers=_headers(self.token, True), json=_call(n, True))
                except httpx2.HTTPError as exc:
                    self.answers.append(Answer(time.monotonic(), False, 0, None, f"{type(exc).__name__}: {exc}", sent))
                    continue
                ok, detail = _judge(response, n)
                self.answers.append(
                    Answer(
                        time.monotonic(), ok, response.status_code, response.headers.get("retry-after"), detail, sent
                    )
                )
