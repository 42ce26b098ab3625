"""Streamlit what-if page: every question of the shared capacity model, one tab each.

Throughput and a change to compare (brokers, replication factor, acks), sizing and traffic growth, broker
failure against Kafka's placement or a live topic's (offline and under-min-ISR partitions, blocking
producers, stalled group members), placement, consumer-group sizing and coordinator, quota allocation.
All numbers come from ``app.capacity`` and ``common.placement``; bad input is one message naming the field.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pandas as pd
import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # streamlit runs this file as a script

from app import ui
from app.capacity.calibration import confidence
from app.capacity.failure import Producer, lose_brokers, stalled_members
from app.capacity.model import ACKS, CODECS, CapacityError, Hardware, Throughput, Workload, throughput
from app.capacity.quota import BrokerLoad, allocate
from app.capacity.sizing import Demand, grow, size
from app.cluster import cluster_shape, live_placement, traffic_queries, traffic_shape
from app.prometheus import PrometheusClient, PrometheusUnavailable
from common.errors import InputError
from common.placement import Assignment, assign_replicas, coordinator_partition, range_assign

HW, WL, DEMAND = Hardware(), Workload(), Demand()
sidebar = st.sidebar


PUBLISHED = "LinkedIn's published benchmark (2014)"
SHAPE_KEYS = {"brokers": "brokers", "partitions": "partitions", "replication_factor": "rf"}  # -> widget key
PUBLISHED_SHAPE = {
    "brokers": HW.brokers,
    "partitions": WL.partitions,
    "replication_factor": WL.replication_factor,
    "ingress_mbps": DEMAND.ingress_mbps,
    "message_bytes": WL.message_bytes,
}
TRAFFIC_KEYS = {"ingress_mbps": "ingress", "message_bytes": "message_bytes"}  # -> widget key


def start_from() -> None:
    """A preset for the sidebar: the published benchmark's numbers, or a watched cluster's shape (brokers,
    partitions, replication factor from its metadata) and its produced traffic (MiB/s and mean message size,
    from Prometheus, where the jobs have measured it); the rest stays as it is."""
    config = ui.settings()
    clusters = {f"live cluster {c.name}": c for c in config.clusters if c.bootstrap_servers}
    keys = SHAPE_KEYS | TRAFFIC_KEYS

    def apply() -> None:
        chosen = st.session_state["preset"]
        st.session_state.pop("preset_note", None)
        if chosen == PUBLISHED:
            shape = PUBLISHED_SHAPE
        else:
            try:
                shape = cluster_shape(live_placement(clusters[chosen])) | live_traffic(clusters[chosen].name)
            except InputError as exc:
                st.session_state["preset_error"] = str(exc)
                return
        st.session_state.pop("preset_error", None)
        for name, key in keys.items():
            if name in shape:
                st.session_state[key] = shape[name]

    def live_traffic(cluster: str) -> dict[str, float]:
        try:
            prom = PrometheusClient(config.app.prometheus_url)
            rates = {
                name: float(frame["value"].sum()) if len(frame) else None
                for name, query in traffic_queries(cluster).items()
                for frame in [prom.instant(query)]
            }
        except PrometheusUnavailable as exc:
            st.session_state["preset_note"] = f"Traffic unknown ({exc}): MiB/s and message size kept."
            return {}
        traffic = traffic_shape(**rates)
        if not traffic:
            st.session_state["preset_note"] = "No produced traffic measured yet: MiB/s and message size kept."
        return traffic

    for name, key in keys.items():  # the widgets below take their values from here
        st.session_state.setdefault(key, PUBLISHED_SHAPE[name])
    sidebar.selectbox("Start from", [PUBLISHED, *clusters], key="preset", on_change=apply)
    if error := st.session_state.get("preset_error"):
        sidebar.error(error)
    if note := st.session_state.get("preset_note"):
        sidebar.info(note)


def hardware_inputs() -> dict:
    sidebar.header("Hardware (per broker)")
    return {
        "brokers": sidebar.number_input("Brokers", min_value=0, key="brokers"),
        "nic_gbps": sidebar.number_input("NIC (Gb/s)", min_value=0.0, value=HW.nic_gbps),
        "disks": sidebar.number_input("Disks", min_value=0, value=HW.disks),
        "disk_mbps": sidebar.number_input("One disk, sequential MiB/s", min_value=0.0, value=HW.disk_mbps),
        "disk_tb": sidebar.number_input("One disk, TB", min_value=0.0, value=HW.disk_tb),
        "cores": sidebar.number_input("Cores", min_value=0, value=HW.cores),
    }


def workload_inputs() -> dict:
    sidebar.header("Workload")
    return {
        "message_bytes": sidebar.number_input("Message bytes", min_value=0, key="message_bytes"),
        "batch_bytes": sidebar.number_input("Batch bytes", min_value=0, value=WL.batch_bytes),
        "acks": sidebar.selectbox("acks", ["0", "1", "all"], index=1, key="acks"),
        "replication_factor": sidebar.number_input("Replication factor", min_value=0, key="rf"),
        "partitions": sidebar.number_input("Partitions", min_value=0, key="partitions"),
        "producers": sidebar.number_input("Producers", min_value=0, value=WL.producers),
        "consumers": sidebar.number_input("Consumers", min_value=0, value=WL.consumers, key="consumers"),
        "compression": sidebar.selectbox("Compression", list(CODECS), key="compression"),
        "compression_ratio": sidebar.number_input(
            "Compression ratio",
            min_value=0.0,
            value=WL.compression_ratio,
            help="How much the codec shrinks your records; 0: its published ratio on the Silesia corpus.",
        ),
        "backlog_gb": sidebar.number_input(
            "Consumers behind by (GB)",
            min_value=0.0,
            value=WL.backlog_gb,
            help="Past what the brokers' page cache holds, consumers read from disk.",
        ),
    }


def placement_inputs() -> tuple[int, int]:
    sidebar.header("Placement (Kafka picks these at random)")
    start = sidebar.number_input(
        "First broker of partition 0",
        min_value=0,
        value=0,
        key="start_index",
        help="The index into the broker list of partition 0's first replica (Kafka's startIndex).",
    )
    shift = sidebar.number_input(
        "Follower offset",
        min_value=0,
        value=0,
        key="replica_shift",
        help="How far after the first replica the followers start (Kafka's nextReplicaShift).",
    )
    return start, shift


def summary(t: Throughput) -> dict[str, str]:
    return {
        "produce records/s": f"{t.produce.records_per_s:,.0f}",
        "produce MB/s": f"{t.mb_per_s(t.produce.records_per_s):,.1f}",
        "consume records/s": f"{t.consume.records_per_s:,.0f}",
        "bottleneck": t.bottleneck,
    }


def show_throughput(hw: Hardware, wl: Workload) -> None:
    result = throughput(hw, wl)
    cols = st.columns(3)
    cols[0].metric("Produce records/s", f"{result.produce.records_per_s:,.0f}")
    cols[1].metric("Produce MB/s", f"{result.mb_per_s(result.produce.records_per_s):,.1f}")
    cols[2].metric("Consume records/s", f"{result.consume.records_per_s:,.0f}")
    st.markdown(f"**Bottleneck** — {result.bottleneck}")
    st.caption(confidence())
    bounds = [*result.produce_bounds, *result.consume_bounds]
    st.bar_chart({b.name: b.records_per_s for b in bounds}, horizontal=True)
    st.subheader("Compare with a change")
    cols = st.columns(3)
    brokers = cols[0].number_input("Brokers then", min_value=0, value=hw.brokers, key="brokers_then")
    rf = cols[1].number_input("RF then", min_value=0, value=wl.replication_factor, key="rf_then")
    acks = cols[2].selectbox("acks then", ACKS, index=ACKS.index(wl.acks), key="acks_then")
    then = throughput(replace(hw, brokers=brokers), replace(wl, replication_factor=rf, acks=acks))
    st.dataframe(pd.DataFrame({"now": summary(result), "then": summary(then)}))


def show_sizing(hw: Hardware, wl: Workload) -> None:
    cols = st.columns(3)
    ingress = cols[0].number_input("Produced MiB/s (payload)", key="ingress")
    retention = cols[1].number_input("Retention hours", value=DEMAND.retention_hours, key="retention")
    growth = cols[2].number_input("Traffic growth %", value=50.0, key="growth")
    demand = Demand(
        ingress_mbps=ingress,
        message_bytes=wl.message_bytes,
        replication_factor=wl.replication_factor,
        partitions=wl.partitions,
        retention_hours=retention,
    )
    now, grown = size(hw, demand), size(hw, grow(demand, growth))
    cols = st.columns(3)
    cols[0].metric("Brokers needed now", now.brokers_needed, help=f"binding: {now.binding}")
    more = grown.brokers_needed - now.brokers_needed
    cols[1].metric(f"After {growth:+g} %", grown.brokers_needed, delta=more)
    cols[2].metric("Disk per broker now (GB)", f"{now.disk_bytes / 1e9 / hw.brokers:,.0f}")
    st.markdown(f"**Binding resource** — now: {now.binding}; after growth: {grown.binding}")
    use = {n.resource: n.utilisation(hw.brokers) for n in grown.needs}
    st.caption(f"Use of each resource on {hw.brokers} brokers after growth (1 = full)")
    st.bar_chart(use, horizontal=True)


def failure_placement(placed: Callable[[], Assignment]) -> Assignment:
    """The placement to break: Kafka's algorithm on the sidebar's numbers, or a live topic's."""
    source = st.radio("Placement", ["from the sidebar", "of a live topic"], horizontal=True, key="source")
    if source == "from the sidebar":
        return placed()
    clusters = {c.name: c for c in ui.settings().clusters}
    cols = st.columns(2)
    topics = live_placement(clusters[cols[0].selectbox("Cluster", list(clusters), key="cluster")])
    if not topics:
        raise CapacityError("topic", "the cluster has no topics yet")
    return topics[cols[1].selectbox("Topic", list(topics), key="topic")]


def show_failure(wl: Workload, assignment: Assignment) -> None:
    brokers = sorted({b for replicas in assignment.values() for b in replicas})
    cols = st.columns(4)
    # No key: another placement's brokers make a new widget, with the first broker chosen again.
    lost = cols[0].multiselect("Brokers that die", brokers, default=brokers[:1])
    min_isr = cols[1].number_input("min.insync.replicas", min_value=0, value=1, key="min_isr")
    rate = cols[2].number_input("Producer MiB/s over all partitions", value=1.0, key="rate")
    keyed = cols[3].toggle("Keyed records", value=True, key="keyed")
    producer = Producer.from_mib("producer", rate, wl.acks, keyed)
    impact = lose_brokers(assignment, lost, min_isr, [producer])
    st.write(f"Offline partitions: **{list(impact.offline) or 'none'}**")
    st.write(f"Under min ISR: **{list(impact.under_min_isr) or 'none'}**")
    seconds = impact.producers[0].seconds_to_block
    verdict = "never blocks" if seconds is None else f"send() blocks after {seconds:,.1f} s"
    st.markdown(f"<div id='verdict'>Producer (acks={wl.acks}): {verdict}</div>", unsafe_allow_html=True)
    members = range_assign(assignment, [f"consumer-{i}" for i in range(wl.consumers)])
    stalled = stalled_members(members, impact.offline)
    groups = ", ".join(f"{m} (partitions {', '.join(map(str, p))})" for m, p in stalled.items())
    st.markdown(f"**Group members stalled** — {groups or 'none'}")


def show_placement(assignment: Assignment) -> None:
    rows = [
        {"partition": p, "replicas": ", ".join(map(str, r)), "leader": r[0]} for p, r in assignment.items()
    ]
    left, right = st.columns(2)
    left.dataframe(pd.DataFrame(rows), hide_index=True)
    brokers = sorted({b for replicas in assignment.values() for b in replicas})
    load = {
        "replicas": [sum(b in r for r in assignment.values()) for b in brokers],
        "leaders": [sum(r[0] == b for r in assignment.values()) for b in brokers],
    }
    right.bar_chart(pd.DataFrame(load, index=map(str, brokers)), stack=False)


def show_group(wl: Workload) -> None:
    members = range_assign(range(wl.partitions), [f"consumer-{i}" for i in range(wl.consumers)])
    idle = [m for m, parts in members.items() if not parts]
    sizes = f"{wl.consumers} members, {wl.partitions} partitions"
    st.markdown(f"**Idle members** — {', '.join(idle) or 'none'} ({sizes})")
    rows = [{"member": m, "partitions": ", ".join(map(str, p))} for m, p in members.items()]
    st.dataframe(pd.DataFrame(rows), hide_index=True)
    cols = st.columns(2)
    group = cols[0].text_input("group.id", value="test_group_1", key="group_id")
    offsets = cols[1].number_input("offsets.topic.num.partitions", min_value=0, value=50, key="offsets")
    partition = coordinator_partition(group, offsets)
    st.markdown(f"**Coordinator** — the leader of `__consumer_offsets` partition **{partition}**")


QUOTA_EXAMPLE = [(4, 60.0), (4, 20.0), (4, 10.0)]  # (partitions, traffic MB/s) of brokers 0, 1, 2


def show_quota() -> None:
    limit = st.number_input("Instance limit MB/s", value=100.0, key="quota_limit")
    count = st.number_input("Brokers", min_value=1, max_value=50, value=len(QUOTA_EXAMPLE), key="quota_count")
    loads = {}
    for b in range(count):
        partitions, traffic = QUOTA_EXAMPLE[b] if b < len(QUOTA_EXAMPLE) else (4, 10.0)
        left, right = st.columns(2)
        loads[b] = BrokerLoad(
            left.number_input(
                f"Broker {b}: partitions", min_value=0, value=partitions, key=f"quota_partitions_{b}"
            ),
            right.number_input(
                f"Broker {b}: traffic MB/s", min_value=0.0, value=traffic, key=f"quota_traffic_{b}"
            ),
        )
    full = st.checkbox("Storage full", key="storage_full")
    result = allocate(limit, loads, full)
    produce = "**blocked** (storage full; consuming goes on)" if result.produce_blocked else "allowed"
    st.markdown(f"**Rule** — {result.rule}; producing {produce}")
    shares = ", ".join(f"broker {b}: {v:.1f} MB/s" for b, v in result.allocation_mbps.items())
    st.markdown(f"**Allocation** — {shares}")
    st.bar_chart({str(b): v for b, v in result.allocation_mbps.items()}, horizontal=True)


def show_error(exc: CapacityError) -> None:
    st.error(f"{exc.field.replace('_', ' ')}: {exc.message}")


def main() -> None:
    st.title("What if")
    start_from()
    try:
        hw, wl = Hardware(**hardware_inputs()), Workload(**workload_inputs())
    except CapacityError as exc:
        show_error(exc)
        return
    start, shift = placement_inputs()

    def placed() -> Assignment:
        return assign_replicas(range(hw.brokers), wl.partitions, wl.replication_factor, start, shift)

    questions = {
        "Throughput": lambda: show_throughput(hw, wl),
        "Sizing and growth": lambda: show_sizing(hw, wl),
        "Broker failure": lambda: show_failure(wl, failure_placement(placed)),
        "Placement": lambda: show_placement(placed()),
        "Consumer group": lambda: show_group(wl),
        "Quota": show_quota,
    }
    for tab, show in zip(st.tabs(list(questions)), questions.values(), strict=True):
        with tab:
            try:
                show()
            except CapacityError as exc:  # one tab's bad input leaves the other answers standing
                show_error(exc)


main()
