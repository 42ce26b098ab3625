"""A Burrow client as teams run them: a Telegraf ``exec`` reporter that walks Burrow's v3 HTTP API.

Written against Burrow's documented API only (its wiki's HTTP endpoint pages and the JSON tags of its
``core/protocol`` structs), standard library only, nothing of Kafka Observatory: the tests run it unchanged
against ``kobs stream``'s Burrow API. For every cluster and consumer group it prints InfluxDB line protocol:

    burrow_group,cluster=C,group=G status="WARN",complete=1,partition_count=3i,totallag=42i,...
    burrow_partition,cluster=C,group=G,topic=T,partition=P status="OK",current_lag=0i,start_offset=...

Usage: ``python burrow_client.py http://burrow:8000``. Exits 1 with the reason when Burrow answers an error.
"""

from __future__ import annotations

import json
import sys
import urllib.error
import urllib.parse
import urllib.request


def get(base: str, *path: str) -> dict:
    url = base.rstrip("/") + "/v3/kafka" + "".join("/" + urllib.parse.quote(p, safe="") for p in path)
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
    except urllib.error.HTTPError as exc:
        raise SystemExit(f"burrow: {url}: HTTP {exc.code}: {exc.read().decode(errors='replace')}") from None
    if body["error"]:
        raise SystemExit(f"burrow: {url}: {body['message']}")
    return body


def escape(value: str) -> str:
    return value.replace(",", r"\,").replace(" ", r"\ ").replace("=", r"\=")


def offset_fields(prefix: str, offset: dict | None) -> list[str]:
    if offset is None:
        return []
    fields = [f"{prefix}_offset={offset['offset']}i", f"{prefix}_timestamp={offset['timestamp']}i"]
    if offset["lag"] is not None:
        fields.append(f"{prefix}_lag={offset['lag']}i")
    return fields


def report(base: str) -> list[str]:
    lines = []
    for cluster in get(base)["clusters"]:
        for group in get(base, cluster, "consumer")["consumers"]:
            status = get(base, cluster, "consumer", group, "lag")["status"]
            tags = f"cluster={escape(cluster)},group={escape(group)}"
            maxlag = status["maxlag"]
            lines.append(
                f'burrow_group,{tags} status="{status["status"]}",complete={status["complete"]},'
                f"partition_count={status['partition_count']}i,totallag={status['totallag']}i"
                + (f",maxlag_partition={maxlag['partition']}i" if maxlag else "")
            )
            for p in status["partitions"]:
                fields = [
                    f'status="{p["status"]}"',
                    f"current_lag={p['current_lag']}i",
                    f"complete={p['complete']}",
                    *offset_fields("start", p["start"]),
                    *offset_fields("end", p["end"]),
                ]
                lines.append(
                    f"burrow_partition,{tags},topic={escape(p['topic'])},partition={p['partition']} "
                    + ",".join(fields)
                )
    return lines


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: burrow_client.py BURROW_URL")
    print("\n".join(report(sys.argv[1])))
