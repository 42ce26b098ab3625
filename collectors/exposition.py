"""Broker and producer metrics from Prometheus JMX-exporter endpoints (Strimzi, Confluent, MSK style).

Each exporter series whose name is in the mapping table (:mod:`collectors.mapping`, extended per cluster
in the configuration) becomes a canonical sample; everything else (JVM, other beans) is ignored. The page's
comments and the lines of mapped series are parsed with prometheus_client's parser; the other lines are
dropped unread first, so parsing (the collector's largest CPU cost) is not spent on what is not ours. A
malformed page (a malformed line of a mapped series) or a failed request is an error with the reason and
yields no samples for that scrape. The whole page must arrive within ``timeout_s`` (an endpoint that
answers a byte at a time never resets a per-read timeout; it can hold its own scrape, never the cycle).
"""

from __future__ import annotations

import functools
import re
import time
import urllib.request
from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

from collectors.mapping import DEFAULT_MAPPING, canonical_samples
from collectors.source import Scrape, now_ms
from common.contract import Batch, Sample


def parse_exposition(text: str, mapping: Mapping[str, str], labels: Mapping[str, str]) -> list[Sample]:
    """Canonical samples of one exposition page; ``labels`` (e.g. ``broker``) win over the page's.

    Raises ValueError when the page is not valid exposition text.
    """
    families = text_string_to_metric_families("".join(_mapped_lines(frozenset(mapping)).findall(text)))
    series = ((s.name, s.labels, s.value) for family in families for s in family.samples)
    return canonical_samples(series, mapping, labels)


@functools.lru_cache(maxsize=16)
def _mapped_lines(names: frozenset[str]) -> re.Pattern[str]:
    """Comment lines and the sample lines of ``names`` (a name followed by ``{`` or a blank)."""
    alternatives = "|".join(map(re.escape, sorted(names)))
    return re.compile(rf"^(?:#|(?:{alternatives})[{{ \t]).*\n?", re.MULTILINE)


def _read_by(response, deadline: float, timeout_s: float) -> bytes:
    """The response body, or TimeoutError once ``deadline`` (monotonic) passes while it still arrives."""
    chunks = []
    while chunk := response.read1(1 << 16):  # whatever has arrived, without waiting for a full buffer
        chunks.append(chunk)
        if time.monotonic() > deadline:
            raise TimeoutError(f"the page did not arrive whole within {timeout_s:g} s")
    return b"".join(chunks)


class ExpositionSource:
    """One JMX-exporter endpoint: ``exporter/broker-<id>`` or ``producer/<client-id>``."""

    def __init__(
        self,
        cluster: str,
        name: str,
        url: str,
        labels: Mapping[str, str],
        mapping: Mapping[str, str] = DEFAULT_MAPPING,
        timeout_s: float = 5.0,
    ):
        self.cluster, self.name, self.url = cluster, name, url
        self.labels, self.mapping, self.timeout_s = dict(labels), mapping, timeout_s

    def collect(self) -> Scrape:
        try:
            deadline = time.monotonic() + self.timeout_s
            with urllib.request.urlopen(self.url, timeout=self.timeout_s) as response:
                ts = now_ms()  # the page holds the values of its answer, however long the request waited
                text = _read_by(response, deadline, self.timeout_s).decode("utf-8")
            samples = parse_exposition(text, self.mapping, self.labels)
        except OSError as exc:
            return Scrape(Batch(self.cluster, self.name, now_ms()), [f"fetch {self.url}: {exc}"])
        except ValueError as exc:
            return Scrape(Batch(self.cluster, self.name, now_ms()), [f"malformed page at {self.url}: {exc}"])
        return Scrape(Batch(self.cluster, self.name, ts, tuple(samples)))
