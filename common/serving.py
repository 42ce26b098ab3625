"""Serving a Prometheus registry on a configured ``host:port``, with one clear line when it cannot listen."""

from __future__ import annotations

import errno
import socket
from threading import Thread
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, start_http_server

from common.config import ConfigError


def check_free(address: str, key: str) -> None:
    """ConfigError, as :func:`serve_metrics` would raise it, when ``address`` cannot be listened on now."""
    host, port = address.rsplit(":", 1)
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host.strip("[]"), int(port)))
        except OSError as exc:
            raise ConfigError(f"config error: {key} {address} {_reason(exc)}") from None


def serve_metrics(address: str, registry: CollectorRegistry, key: str) -> tuple[WSGIServer, Thread]:
    """Serve ``registry`` on ``/metrics`` at ``address`` (the configuration's ``key``, named in the error);
    returns the server and its thread. ConfigError when the address is in use or cannot be bound."""
    host, port = address.rsplit(":", 1)
    try:
        return start_http_server(int(port), host.strip("[]"), registry=registry)
    except OSError as exc:
        raise ConfigError(f"config error: {key} {address} {_reason(exc)}") from None


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "is in use (another kobs process?) — stop what listens there or choose another port"
    return f"cannot be served ({exc.strerror or exc}) — choose an address of this machine"
