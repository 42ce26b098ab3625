"""Serving a Prometheus registry (and any WSGI apps mounted beside it) on a configured ``host:port``, with
one clear line when it cannot listen."""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Mapping
from threading import Thread
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

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


def serve_metrics(
    address: str, registry: CollectorRegistry, key: str, mounts: Mapping[str, Callable] | None = None
) -> tuple[WSGIServer, Thread]:
    """Serve ``registry`` on ``/metrics`` at ``address`` (the configuration's ``key``, named in the error),
    and each WSGI app of ``mounts`` on the paths starting with its prefix; returns the server and its
    thread. ConfigError when the address is in use or cannot be bound."""
    metrics = make_wsgi_app(registry)
    mounted = dict(mounts or {})

    def app(environ: dict, start_response: Callable) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        chosen = next((a for prefix, a in mounted.items() if path.startswith(prefix)), metrics)
        return chosen(environ, start_response)

    host, port = address.rsplit(":", 1)
    host = host.strip("[]")

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = make_server(host, int(port), app, Server, handler_class=_Quiet)
    except OSError as exc:
        raise ConfigError(f"config error: {key} {address} {_reason(exc)}") from None
    thread = Thread(target=server.serve_forever, name=f"serve {address}", daemon=True)
    thread.start()
    return server, thread


class _Quiet(WSGIRequestHandler):
    """No access log on stderr: Prometheus scrapes every few seconds."""

    def log_message(self, format: str, *args) -> None:
        pass


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "is in use (another kobs process?) — stop what listens there or choose another port"
    return f"cannot be served ({exc.strerror or exc}) — choose an address of this machine"
