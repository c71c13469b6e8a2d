"""Keep-alive HTTP connections pinned to one worker process each (gunicorn's workers share one
port): a connection is reopened until the kernel hands it to the wanted process, found by the
inode of the server side of the socket in ``/proc`` (the server runs on this machine).
Used by ``tests/topology/test_revocation_cross_process.py`` and ``bench/revocation.py``."""

from __future__ import annotations

import http.client
import json
import os
import time
from pathlib import Path

__all__ = ["Worker"]


def _socket_inodes(pid: int) -> set[str]:
    inodes = set()
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return inodes
    for fd in fds:
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def _server_inode(server_port: int, client_port: int) -> str | None:
    """The inode of the server side of the loopback connection from ``client_port``."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1], fields[2]
            if int(local.rsplit(":", 1)[1], 16) == server_port and int(remote.rsplit(":", 1)[1], 16) == client_port:
                return fields[9]
    return None


class Worker:
    """A keep-alive connection to one worker process (reopened until it lands on that process)."""

    def __init__(self, port: int, pid: int, worker_pids: list[int]) -> None:
        self.port, self.pid, self.worker_pids = port, pid, worker_pids
        self.connection: http.client.HTTPConnection | None = None

    def _owner(self, connection: http.client.HTTPConnection) -> int | None:
        client_port = connection.sock.getsockname()[1]
        for _ in range(50):
            inode = _server_inode(self.port, client_port)
            if inode is not None:
                for pid in self.worker_pids:
                    if inode in _socket_inodes(pid):
                        return pid
            time.sleep(0.01)  # accepted a moment later
        return None

    def _connect(self) -> http.client.HTTPConnection:
        for _ in range(200):
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            connection.connect()
            # a request first: the worker accepts the connection when it reads it
            connection.request("GET", "/.well-known/oauth-protected-resource/mcp")
            connection.getresponse().read()
            if self._owner(connection) == self.pid:
                return connection
            connection.close()
        raise RuntimeError(f"no connection reached worker {self.pid}")

    def post(self, body: dict, headers: dict[str, str], want: str = "") -> tuple[int, str | None]:
        for attempt in (1, 2):
            if self.connection is None:
                self.connection = self._connect()
            try:
                self.connection.request("POST", "/mcp", json.dumps(body).encode(), headers)
                response = self.connection.getresponse()
                response.read()
                return response.status, response.getheader(want) if want else None
            except (http.client.HTTPException, OSError):
                self.connection.close()
                self.connection = None  # the server closed an idle connection: reconnect
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")
