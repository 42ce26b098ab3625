"""The exporter's HTTP serving (common.serving): a registry rendered once per version, whoever scrapes it."""

from __future__ import annotations

import gzip
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CollectorRegistry, Gauge

from common.serving import serve_metrics
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


def scrape(url: str, **headers: str) -> tuple[dict[str, str], bytes]:
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=10) as response:
        return dict(response.headers), response.read()


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
    assert gzip.decompress(body) == text
    assert b"kobs_test_value" not in scrape(url + "?name[]=other")[1]  # prometheus_client's name filter
