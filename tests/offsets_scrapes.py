"""Run by ``test_collect_offsets`` in a process of its own, so that a native abort (librdkafka's) shows as
its exit status rather than ending the test session: the offsets source of a cluster scraped every second
until the process is stopped.

Usage: python tests/offsets_scrapes.py BOOTSTRAP GROUP TIMEOUT_S; one JSON line per scrape:
{"at": seconds since the start, "errors": [...], "committed": {partition: GROUP's committed offset}}.
"""

from __future__ import annotations

import json
import sys
import time

from collectors.offsets import OffsetsSource
from common import names
from common.config import Cluster


def main(bootstrap: str, group: str, timeout_s: str) -> None:
    source = OffsetsSource(Cluster(name="scraped", bootstrap_servers=[bootstrap]), timeout_s=float(timeout_s))
    start = time.monotonic()
    while True:
        scrape = source.collect()
        committed = {
            s.labels["partition"]: s.value
            for s in scrape.batch.samples
            if s.name == names.GROUP_COMMITTED_OFFSET and s.labels["group"] == group
        }
        line = {"at": round(time.monotonic() - start, 1), "errors": scrape.errors, "committed": committed}
        print(json.dumps(line), flush=True)
        time.sleep(max(0.0, 1.0 - (time.monotonic() - start) % 1.0))


if __name__ == "__main__":
    main(*sys.argv[1:])
