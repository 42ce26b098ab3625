"""The exporter's HTTP serving (common.serving): a registry rendered once per version, whoever scrapes it."""

from __future__ import annotations

import gzip
import socket
import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from prometheus_client import CollectorRegistry, Gauge, Histogram
from waiting import until

from common.serving import IDLE_TIMEOUT_S, WORKERS, rendered_once, serve_metrics
from peers.process import HOST, free_port


@pytest.fixture
def served() -> Iterator[tuple[str, Gauge, list[int]]]:
    """A gauge served with a version the test moves by hand: (URL, gauge, [version])."""
    registry = CollectorRegistry()
    gauge = Gauge("kobs_test_value", "a value the test sets", registry=registry)
    version = [0]
    address = f"{HOST}:{free_port()}"
    server, thread = serve_metrics(address, registry, "test_address", version=lambda: version[0])
    try:
        yield f"http://{address}/metrics", gauge, version
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def scrape(url: str, timeout_s: float = 10, **headers: str) -> tuple[dict[str, str], bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=timeout_s) as response:
        return dict(response.headers), response.read()


def values(page: bytes) -> list[bytes]:
    """The page's samples but the renderings' own timings."""
    return [line for line in page.splitlines() if b"kobs_exporter_render_seconds" not in line]


def renderings(url: str) -> float:
    """How many renderings the server timed, as its page of the moment says."""
    (line,) = [
        line for line in scrape(url)[1].splitlines() if line.startswith(b"kobs_exporter_render_seconds_count")
    ]
    return float(line.split()[-1])


def test_a_value_changed_without_a_new_version_is_served_as_first_rendered(served):
    url, gauge, version = served
    gauge.set(1)
    assert b"kobs_test_value 1.0" in scrape(url)[1]
    gauge.set(2)
    assert b"kobs_test_value 1.0" in scrape(url)[1]  # the same version: the rendering kept
    version[0] += 1
    assert b"kobs_test_value 2.0" in scrape(url)[1]


def test_each_kind_of_request_gets_its_own_rendering(served):
    url, gauge, _ = served
    gauge.set(3)
    text = scrape(url)[1]
    assert b"kobs_test_value 3.0" in text and not text.endswith(b"# EOF\n")
    headers, body = scrape(url, Accept="application/openmetrics-text; version=1.0.0")
    assert headers["Content-Type"].startswith("application/openmetrics-text")
    assert body.endswith(b"# EOF\n")  # OpenMetrics' terminator, never in the text format
    headers, body = scrape(url, **{"Accept-Encoding": "gzip"})
    assert headers.get("Content-Encoding") == "gzip"
    assert values(gzip.decompress(body)) == values(text)
    assert b"kobs_test_value" not in scrape(url + "?name[]=other")[1]  # prometheus_client's name filter


def test_a_query_string_that_filters_nothing_is_served_the_same_rendering(served):
    """Cache-busters (``?_=<time>``) do not make a scraper crowd render the page again and again; each
    distinct name filter is a rendering of its own."""
    url, _, version = served
    version[0] += 1
    before = renderings(url)  # this scrape rendered the new version's page: it shows the renderings before
    for n in range(20):
        scrape(f"{url}?_={n}")
    scrape(f"{url}?name[]=kobs_test_value")
    scrape(f"{url}?name[]=kobs_test_value&_=1")
    version[0] += 1
    assert renderings(url) == before + 2  # the plain page, the filtered one; then the new version's


def test_silent_connections_are_closed_and_never_keep_a_scraper_out(served):
    """More silent connections than the server has workers: a scrape is still answered, and every silent
    connection is closed by the server within its idle timeout."""
    url, gauge, _ = served
    host, port = url.split("/")[2].split(":")
    silent = [socket.create_connection((host, int(port))) for _ in range(WORKERS + 5)]
    try:
        started = time.monotonic()
        gauge.set(4)
        assert b"kobs_test_value 4.0" in scrape(url, timeout_s=IDLE_TIMEOUT_S * 3)[1]
        for connection in silent:
            connection.settimeout(IDLE_TIMEOUT_S * 3)
            assert connection.recv(1) == b""  # closed by the server
        assert time.monotonic() - started < IDLE_TIMEOUT_S * 3
    finally:
        for connection in silent:
            connection.close()


def test_scrapers_arriving_while_a_new_version_renders_get_the_previous_rendering():
    """Only the scrape that finds a new version waits for its rendering (a large page takes a while)."""
    release, calls = threading.Event(), []

    def app(environ: dict, start_response) -> list[bytes]:
        calls.append(environ)
        if len(calls) == 2:
            release.wait(10)
        start_response("200 OK", [])
        return [f"page {len(calls)}".encode()]

    version = [1]
    cached = rendered_once(app, lambda: version[0], Histogram("t", "t", registry=CollectorRegistry()))

    def get() -> bytes:
        return b"".join(cached({}, lambda *_: None))

    assert get() == b"page 1"
    version[0] = 2
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(get)
        until(lambda: len(calls) == 2, timeout_s=10)
        assert get() == b"page 1"  # answered at once, from the rendering before
        release.set()
        assert first.result(10) == b"page 2"
    assert get() == b"page 2"
    assert len(calls) == 2
