"""Which addresses processes listen on, read from Linux's /proc (what ``ss -ltnp`` shows), for tests that
check nothing listens beyond loopback."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

LISTEN = "0A"  # TCP state LISTEN in /proc/net/tcp


def descendants(pids: set[int]) -> set[int]:
    """The processes and all their children, grandchildren, ..."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # exited meanwhile
            continue
        parents[int(stat.parent.name)] = int(fields[1])
    found, frontier = set(pids), set(pids)
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _address(hex_address: str) -> str:
    """``0100007F:1F90`` (an address as /proc/net/tcp prints it, in host byte order per 32-bit word)."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


def listening(pids: set[int]) -> set[tuple[str, int, int]]:
    """(address, port, pid) of every TCP socket in LISTEN state that one of ``pids`` holds."""
    sockets: dict[str, tuple[str, int]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN:
                address, port = fields[1].split(":")
                sockets[fields[9]] = (_address(address), int(port, 16))
    found = set()
    for pid in pids:
        for link in _fd_links(pid):
            inode = link[len("socket:[") : -1] if link.startswith("socket:[") else None
            if inode in sockets:
                found.add((*sockets[inode], pid))
    return found


def _fd_links(pid: int) -> list[str]:
    """What the process's file descriptors point to (skipping any closed while listed)."""
    links = []
    try:
        fds = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:  # exited meanwhile
        return links
    for fd in fds:
        try:
            links.append(os.readlink(fd))
        except OSError:
            continue
    return links


def _is_loopback(address: str) -> bool:
    ip = ipaddress.ip_address(address)
    mapped = getattr(ip, "ipv4_mapped", None)  # ::ffff:127.0.0.1
    return (mapped or ip).is_loopback


def beyond_loopback(pids: set[int]) -> set[tuple[str, int, int]]:
    """The listening sockets of these processes and their descendants not bound to a loopback address."""
    return {(a, port, pid) for a, port, pid in listening(descendants(pids)) if not _is_loopback(a)}
