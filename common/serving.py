"""Serving a Prometheus registry (and any WSGI apps mounted beside it) on a configured ``host:port``, with
one clear line when it cannot listen."""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable, Hashable, Mapping
from threading import Lock, Thread
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
    address: str,
    registry: CollectorRegistry,
    key: str,
    mounts: Mapping[str, Callable] | None = None,
    version: Callable[[], Hashable] | None = None,
) -> tuple[WSGIServer, Thread]:
    """Serve ``registry`` on ``/metrics`` at ``address`` (the configuration's ``key``, named in the error),
    and each WSGI app of ``mounts`` on the paths starting with its prefix; returns the server and its
    thread. With ``version``, the registry's values change only when it does, and each rendering is
    served until then (:func:`rendered_once`). ConfigError when the address is in use or cannot be bound."""
    metrics = make_wsgi_app(registry)
    if version is not None:
        metrics = rendered_once(metrics, version)
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


def rendered_once(app: Callable, version: Callable[[], Hashable]) -> Callable:
    """``app``'s responses kept per kind of request (its query, Accept and Accept-Encoding headers) until
    ``version()`` changes. Rendering thousands of series is the exporter's cost (prometheus_client formats
    and checks every label of every sample on each scrape: measured, most of kobs stream's driver CPU
    under a 5-per-second poll); values that change once per micro-batch are rendered once per batch,
    however many scrapers ask."""
    lock = Lock()
    kept: dict[Hashable, tuple[str, list, list[bytes]]] = {}
    seen: list[Hashable] = [None]

    def cached(environ: dict, start_response: Callable) -> list[bytes]:
        now = version()  # read before rendering: a change meanwhile renders again on the next request
        ask = tuple(environ.get(k, "") for k in ("QUERY_STRING", "HTTP_ACCEPT", "HTTP_ACCEPT_ENCODING"))
        with lock:
            if seen[0] != now:
                kept.clear()
                seen[0] = now
            if ask not in kept:
                response: list = []
                body = app(environ, lambda status, headers, *_: response.extend((status, headers)))
                kept[ask] = (*response, list(body))
            status, headers, body = kept[ask]
        start_response(status, headers)
        return body

    return cached


class _Quiet(WSGIRequestHandler):
    """No access log on stderr: Prometheus scrapes every few seconds. The request target as sent is in the
    environ's ``RAW_URI`` (as gunicorn names it): ``PATH_INFO`` has its escapes decoded, as Latin-1."""

    def get_environ(self) -> dict:
        return {**super().get_environ(), "RAW_URI": self.path}

    def log_message(self, format: str, *args) -> None:
        pass


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "is in use (another kobs process?) — stop what listens there or choose another port"
    return f"cannot be served ({exc.strerror or exc}) — choose an address of this machine"
