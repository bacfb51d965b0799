"""Whether a server can listen on an address, asked before uvicorn starts (which would log its
startup lines first, then the error, then its shutdown lines)."""

from __future__ import annotations

import errno
import socket

__all__ = ["listen_problem"]


def listen_problem(host: str, port: int) -> OSError | None:
    """Why a server cannot listen on `host:port` (the operating system's error), or None.

    Every address the host resolves to is bound and released at once, as asyncio's
    `create_server` (uvicorn's) binds them, with the same SO_REUSEADDR: a port that a
    listening socket holds fails here, one that only lingers in TIME_WAIT does not. Another
    process may still take the port in between; uvicorn then reports it as before."""
    if not 0 <= port <= 65535:
        return OSError(errno.EINVAL, f"port {port} is not one (a port is 1 to 65535)")
    try:
        addresses = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as err:  # socket.gaierror: no such host
        return err
    unavailable: OSError | None = None
    bound = 0
    for family, kind, proto, _, address in addresses:
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6 and hasattr(socket, "IPPROTO_IPV6"):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind(address)
            except OSError as err:
                if err.errno != errno.EADDRNOTAVAIL:
                    return err
                unavailable = err  # asyncio skips such an address too (its family is off)
            else:
                bound += 1
    return unavailable if not bound else None
