"""The listening socket of a stopping server: no connection accepted by the kernel and then reset.

Closing a listening socket resets the connections that the kernel completed and nobody accepted
yet (its accept queue). A load balancer that opened one of them in the instant before the close
has already written a request on it, and gets a reset instead of an answer; it may not send a POST
again (it cannot know the request was never read), so the client gets a 502 (measured through
nginx with 20 clients: one such 502 in one of three stops). :func:`refuse_new_connections` closes that window before the
close: a socket filter that drops every packet reaching the listening socket (Linux
``SO_ATTACH_FILTER``, classic BPF ``ret #0``) stops new handshakes — a client's SYN goes
unanswered, is sent again after its retransmission timeout (1 s) and is then refused by the closed
port, which a balancer retries on another host — while the connections already completed wait in
the queue and are accepted and answered. The caller then accepts for a moment and closes.

Only when nobody else will accept on the socket: under gunicorn the kernel socket is shared by
the master and every worker, and in a rolling restart (SIGHUP) new workers go on accepting on it
after the old ones drain. :func:`shared_with_parent` tells the cases apart: gunicorn's master
closes its copy as soon as it is told to stop, and keeps it through a rolling restart.
"""

from __future__ import annotations

import ctypes
import os
import socket
import struct
from typing import Any

__all__ = ["refuse_new_connections", "shared_with_parent"]

#: ``SO_ATTACH_FILTER`` (Linux; ``socket`` has no name for it).
SO_ATTACH_FILTER = getattr(socket, "SO_ATTACH_FILTER", 26)
#: One classic BPF instruction, ``struct sock_filter {u16 code; u8 jt; u8 jf; u32 k;}``:
#: ``BPF_RET | BPF_K`` with k = 0, "keep 0 bytes": every packet is dropped.
DROP_EVERY_PACKET = struct.pack("@HBBI", 0x06, 0, 0, 0)


def refuse_new_connections(sock: Any) -> bool:
    """Stop new handshakes on the listening socket ``sock`` (a ``socket.socket`` or asyncio's
    transport socket); the connections already in its accept queue stay there. The filter is the
    socket's: every process sharing it is affected. :returns: False where the system does not
    support socket filters (nothing changed)."""
    program = ctypes.create_string_buffer(DROP_EVERY_PACKET, len(DROP_EVERY_PACKET))
    # struct sock_fprog {unsigned short len; struct sock_filter *filter;}: the kernel copies the
    # program during the call, while ``program`` is alive
    fprog = struct.pack("@HP", 1, ctypes.addressof(program))
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)
    except OSError:
        return False
    return True


def shared_with_parent(sock: Any) -> bool:
    """True when this process's parent holds the kernel socket of ``sock`` too (gunicorn's master
    in a rolling restart), or when that cannot be told (no ``/proc``): then others accept on it."""
    try:
        inode = os.fstat(sock.fileno()).st_ino
        fds = f"/proc/{os.getppid()}/fd"
        names = os.listdir(fds)
    except OSError:
        return True
    target = f"socket:[{inode}]"
    for name in names:
        try:
            if os.readlink(f"{fds}/{name}") == target:
                return True
        except OSError:
            continue
    return False
