"""Serving a Prometheus registry (and any WSGI apps mounted beside it) on a configured ``host:port``, with
one clear line when it cannot listen.

A crowd of scrapers (50 clients at once) is served by a fixed pool of workers behind a listen backlog of
``BACKLOG``; a connection that sends nothing is closed after ``IDLE_TIMEOUT_S``, so it cannot hold a
worker; the page is rendered once per change of its values and kind of request (:func:`rendered_once`).
"""

from __future__ import annotations

import errno
import socket
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from concurrent.futures import ThreadPoolExecutor
from threading import Condition, Thread
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, Histogram, make_wsgi_app

from common.config import ConfigError

BACKLOG = 128  # connections the kernel queues before a worker accepts them (socketserver's default is 5)
WORKERS = 32  # connections served at once (a silent one holds its worker until IDLE_TIMEOUT_S)
IDLE_TIMEOUT_S = 10.0  # a connection that sends or takes nothing for this long is closed
KINDS_KEPT = 16  # renderings kept: one per kind of request (name filter, format, encoding)

Response = tuple[str, list, list[bytes]]  # status, headers, body


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
    served until then (:func:`rendered_once`, timed in ``kobs_exporter_render_seconds``). ConfigError when
    the address is in use or cannot be bound."""
    metrics = make_wsgi_app(registry)
    if version is not None:
        seconds = Histogram(
            "kobs_exporter_render_seconds",
            "Time to render one kind of /metrics page.",
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
            registry=registry,
        )
        metrics = rendered_once(metrics, version, seconds)
    mounted = dict(mounts or {})

    def app(environ: dict, start_response: Callable) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        chosen = next((a for prefix, a in mounted.items() if path.startswith(prefix)), metrics)
        return chosen(environ, start_response)

    host, port = address.rsplit(":", 1)
    host = host.strip("[]")

    class Server(_PooledServer):
        address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

    try:
        server = make_server(host, int(port), app, Server, handler_class=_Quiet)
    except OSError as exc:
        raise ConfigError(f"config error: {key} {address} {_reason(exc)}") from None
    thread = Thread(target=server.serve_forever, name=f"serve {address}", daemon=True)
    thread.start()
    return server, thread


def rendered_once(app: Callable, version: Callable[[], Hashable], seconds: Histogram) -> Callable:
    """``app``'s responses kept per kind of request until ``version()`` changes. Rendering thousands of
    series is the exporter's cost (prometheus_client formats and checks every label of every sample on each
    scrape: measured, most of kobs stream's driver CPU under a 5-per-second poll); values that change once
    per micro-batch are rendered once per batch, however many scrapers ask. The request that finds a new
    version renders it; those arriving meanwhile get the previous rendering rather than wait. A kind is what
    changes the page (:func:`_kind`): a query string with anything else in it, a cache-buster, is the same
    kind. At most ``KINDS_KEPT`` kinds are kept, the least recently asked dropped first."""
    changed = Condition()
    kept: OrderedDict[Hashable, tuple[Hashable, Response]] = OrderedDict()  # kind -> (version, response)
    rendering: set[Hashable] = set()

    def render(environ: dict) -> Response:
        started = time.perf_counter()
        response: list = []
        body = app(environ, lambda status, headers, *_: response.extend((status, headers)))
        rendered = (*response, list(body))
        seconds.observe(time.perf_counter() - started)
        return rendered

    def cached(environ: dict, start_response: Callable) -> list[bytes]:
        now = version()  # read before rendering: a change meanwhile renders again on the next request
        kind = _kind(environ)
        with changed:
            while kind not in kept and kind in rendering:  # its first rendering is under way
                changed.wait()
            held = kept.get(kind)
            if held is not None:
                kept.move_to_end(kind)
            mine = (held is None or held[0] != now) and kind not in rendering
            if mine:
                rendering.add(kind)
        if mine:
            try:
                held = (now, render(environ))
            finally:
                with changed:
                    rendering.discard(kind)
                    if held is not None and held[0] == now:
                        kept[kind] = held
                        while len(kept) > KINDS_KEPT:
                            kept.popitem(last=False)
                    changed.notify_all()
        status, headers, body = held[1]
        start_response(status, headers)
        return body

    return cached


def _kind(environ: dict) -> tuple:
    """What prometheus_client's page depends on: the ``name[]`` filters of the query string, the Accept
    header (text or OpenMetrics) and whether gzip is accepted."""
    names = tuple(sorted(parse_qs(environ.get("QUERY_STRING", "")).get("name[]", ())))
    gzip = "gzip" in environ.get("HTTP_ACCEPT_ENCODING", "")
    return names, environ.get("HTTP_ACCEPT", ""), gzip


class _PooledServer(WSGIServer):
    """Each accepted connection handled by one of ``WORKERS`` threads; more wait in the backlog."""

    request_queue_size = BACKLOG

    def __init__(self, *args, **kwargs):
        self._workers = ThreadPoolExecutor(WORKERS, thread_name_prefix="serve")
        super().__init__(*args, **kwargs)

    def process_request(self, request, client_address) -> None:
        self._workers.submit(self._serve, request, client_address)

    def _serve(self, request, client_address) -> None:
        try:
            self.finish_request(request, client_address)
        except OSError:
            pass  # the client went away, or sent nothing for IDLE_TIMEOUT_S
        except Exception:  # what socketserver does with the rest: print it, keep serving
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)

    def server_close(self) -> None:
        super().server_close()
        self._workers.shutdown(wait=False, cancel_futures=True)


class _Quiet(WSGIRequestHandler):
    """No access log on stderr: Prometheus scrapes every few seconds. The request target as sent is in the
    environ's ``RAW_URI`` (as gunicorn names it): ``PATH_INFO`` has its escapes decoded, as Latin-1. A
    connection silent for ``IDLE_TIMEOUT_S`` is closed."""

    timeout = IDLE_TIMEOUT_S

    def get_environ(self) -> dict:
        return {**super().get_environ(), "RAW_URI": self.path}

    def log_message(self, format: str, *args) -> None:
        pass


def _reason(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "is in use (another kobs process?) — stop what listens there or choose another port"
    return f"cannot be served ({exc.strerror or exc}) — choose an address of this machine"
