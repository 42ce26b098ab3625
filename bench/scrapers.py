"""``kobs bench scrapers``: a crowd of scrapers against the exporter's serving (:mod:`common.serving`: a pool
of workers behind a backlog of 128, one rendering per version and kind of request), and against
prometheus_client's own ``start_http_server`` serving the same page (a thread per connection, a backlog of 5,
a rendering per request): the baseline.

The page holds ``--series`` gauges shaped like per-partition lag series, their values changing every
``--batch-s`` (a micro-batch). ``--clients`` scrapers ask at once, ``--requests`` in all, every other request
with a cache-buster query string (``?_=<n>``, as some scrapers send). Each server runs in a process of its
own, the scrapers in one asyncio loop; each request is timed from its connect to the end of the page. Prints
each server's latency percentiles, failed requests and the kernel's listen overflows during its run (all
of the machine's: keep it otherwise idle). Target: p99 under 100 ms at 50 clients.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import statistics
import time
from pathlib import Path

from bench.cli import at_least_one
from peers.process import HOST, free_port, tcp_ready

TARGET_P99_S = 0.100
REQUEST_TIMEOUT_S = 30.0
LABELS = ("cluster", "group", "topic", "partition")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--clients", type=at_least_one, default=50, help="scrapers asking at once (50)")
    parser.add_argument(
        "--requests", type=at_least_one, default=2000, help="requests in all, per server (2000)"
    )
    parser.add_argument(
        "--series", type=at_least_one, default=600, help="gauges on the page (600: 60 KB, the demo's page)"
    )
    parser.add_argument(
        "--batch-s", type=float, default=5.0, help="seconds between changes of the page's values (5)"
    )


def run(args: argparse.Namespace) -> int:
    print(
        f"workload: {args.clients} clients at once, {args.requests} requests per server, a page of "
        f"{args.series} series changing every {args.batch_s:g} s, every other request cache-busted"
    )
    results = {}
    for server in ("kobs", "baseline"):
        results[server] = _measure(server, args)
        print(_report(server, *results[server]), flush=True)
    p99 = _percentile(results["kobs"][0], 0.99)
    met = p99 < TARGET_P99_S and not results["kobs"][1]
    print("baseline: prometheus_client.start_http_server on the same page, in the same run")
    print(f"target: p99 < {TARGET_P99_S * 1000:.0f} ms, no failed request: {'met' if met else 'NOT met'}")
    return 0


def _measure(server: str, args: argparse.Namespace) -> tuple[list[float], int, int]:
    """(latencies of the answered requests, failed requests, listen overflows) of one server."""
    port = free_port()
    process = multiprocessing.get_context("spawn").Process(
        target=_serve, args=(server, port, args.series, args.batch_s), daemon=True
    )
    process.start()
    try:
        deadline = time.monotonic() + 30
        while not tcp_ready(port)():
            if time.monotonic() > deadline or not process.is_alive():
                raise SystemExit(f"kobs bench scrapers: the {server} server did not start")
            time.sleep(0.1)
        asyncio.run(_scrape(port, 1, 2))  # its first rendering, not timed
        overflows = _listen_overflows()
        latencies, failed = asyncio.run(_scrape(port, args.clients, args.requests))
        return latencies, failed, _listen_overflows() - overflows
    finally:
        process.terminate()
        process.join(10)


def _serve(server: str, port: int, series: int, batch_s: float) -> None:
    """The child process: one server on ``port`` until terminated."""
    from prometheus_client import CollectorRegistry, start_http_server
    from prometheus_client.core import GaugeMetricFamily

    def batch() -> int:
        return int(time.monotonic() / batch_s)

    class Page:
        def collect(self):
            family = GaugeMetricFamily("kobs_consumergroup_partition_lag", "Lag in messages.", labels=LABELS)
            now = batch()
            for i in range(series):
                labels = ("prod", f"group-{i // 100}", f"topic-{i // 10 % 10}", str(i % 10))
                family.add_metric(labels, i + now)
            yield family

    registry = CollectorRegistry()
    registry.register(Page())
    if server == "kobs":
        from common.serving import serve_metrics

        serve_metrics(f"{HOST}:{port}", registry, "bench", version=batch)
    else:
        start_http_server(port, addr=HOST, registry=registry)
    while True:
        time.sleep(3600)


async def _scrape(port: int, clients: int, requests: int) -> tuple[list[float], int]:
    """``requests`` GETs of /metrics by ``clients`` at once: (latencies of the answered ones, failed)."""
    latencies: list[float] = []
    failed = 0
    numbers = iter(range(requests))

    async def client() -> None:
        nonlocal failed
        for n in numbers:
            target = f"/metrics?_={n}" if n % 2 else "/metrics"
            started = time.perf_counter()
            try:
                ok = await asyncio.wait_for(_get(port, target), REQUEST_TIMEOUT_S)
            except (TimeoutError, OSError):
                ok = False
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                failed += 1

    await asyncio.gather(*(client() for _ in range(clients)))
    return latencies, failed


async def _get(port: int, target: str) -> bool:
    """One HTTP/1.1 GET on a connection of its own; whether it answered 200 with a page."""
    reader, writer = await asyncio.open_connection(HOST, port)
    try:
        writer.write(f"GET {target} HTTP/1.1\r\nHost: {HOST}:{port}\r\nConnection: close\r\n\r\n".encode())
        await writer.drain()
        response = await reader.read()
    finally:
        writer.close()
    return response.startswith((b"HTTP/1.0 200", b"HTTP/1.1 200")) and b"kobs_consumergroup" in response


def _listen_overflows() -> int:
    """The kernel's count of connections dropped because a listen backlog was full (TcpExt)."""
    lines = Path("/proc/net/netstat").read_text().splitlines()
    for names, values in zip(lines[::2], lines[1::2], strict=True):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split(), strict=True))["ListenOverflows"])
    return 0


def _percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0.5, 0.95, 0.99) of ``values``; infinite when there are none."""
    if len(values) < 2:
        return values[0] if values else float("inf")
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _report(server: str, latencies: list[float], failed: int, overflows: int) -> str:
    name = "kobs (common.serving)" if server == "kobs" else "baseline (start_http_server)"
    ms = {q: _percentile(latencies, q) * 1000 for q in (0.5, 0.95, 0.99)}
    top = max(latencies, default=float("inf")) * 1000
    mean = statistics.fmean(latencies) * 1000 if latencies else float("inf")
    return (
        f"{name}: p50 {ms[0.5]:.1f} ms, p95 {ms[0.95]:.1f} ms, p99 {ms[0.99]:.1f} ms, max {top:.1f} ms, "
        f"mean {mean:.1f} ms; {len(latencies)} answered, {failed} failed; {overflows} listen overflows"
    )
