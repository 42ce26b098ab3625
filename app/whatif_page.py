"""Streamlit what-if page: throughput and broker failure from the shared capacity model.

Run by ``kobs app`` (``streamlit run app/whatif_page.py``); all numbers come from ``app.capacity``.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # streamlit runs this file as a script

from app.capacity.failure import Producer, lose_brokers
from app.capacity.model import MIB, CapacityError, Hardware, Workload, throughput
from common.placement import assign_replicas

HW, WL = Hardware(), Workload()


def hardware_inputs() -> dict:
    st.sidebar.header("Hardware (per broker)")
    return {
        "brokers": st.sidebar.number_input("Brokers", min_value=0, value=HW.brokers, key="brokers"),
        "nic_gbps": st.sidebar.number_input("NIC (Gb/s)", min_value=0.0, value=HW.nic_gbps),
        "disks": st.sidebar.number_input("Disks", min_value=0, value=HW.disks),
        "disk_mbps": st.sidebar.number_input("One disk, sequential MiB/s", min_value=0.0, value=HW.disk_mbps),
        "cores": st.sidebar.number_input("Cores", min_value=0, value=HW.cores),
    }


def workload_inputs() -> dict:
    st.sidebar.header("Workload")
    return {
        "message_bytes": st.sidebar.number_input("Message bytes", min_value=0, value=WL.message_bytes),
        "batch_bytes": st.sidebar.number_input("Batch bytes", min_value=0, value=WL.batch_bytes),
        "acks": st.sidebar.selectbox("acks", ["0", "1", "all"], index=1),
        "replication_factor": st.sidebar.number_input(
            "Replication factor", min_value=0, value=WL.replication_factor, key="rf"
        ),
        "partitions": st.sidebar.number_input(
            "Partitions", min_value=0, value=WL.partitions, key="partitions"
        ),
        "producers": st.sidebar.number_input("Producers", min_value=0, value=WL.producers),
        "consumers": st.sidebar.number_input("Consumers", min_value=0, value=WL.consumers),
    }


def show_throughput(hw: Hardware, wl: Workload) -> None:
    result = throughput(hw, wl)
    cols = st.columns(3)
    cols[0].metric("Produce records/s", f"{result.produce.records_per_s:,.0f}")
    cols[1].metric("Produce MB/s", f"{result.mb_per_s(result.produce.records_per_s):,.1f}")
    cols[2].metric("Consume records/s", f"{result.consume.records_per_s:,.0f}")
    st.markdown(f"**Bottleneck** — {result.bottleneck}")
    bounds = [*result.produce_bounds, *result.consume_bounds]
    st.bar_chart({b.name: b.records_per_s for b in bounds}, horizontal=True)


def show_failure(hw: Hardware, wl: Workload) -> None:
    lost = st.multiselect("Brokers that die", list(range(hw.brokers)), default=[0], key="lost")
    min_isr = st.number_input("min.insync.replicas", min_value=1, value=1)
    rate = st.number_input("Keyed producer MiB/s over all partitions", min_value=0.0, value=1.0, key="rate")
    placement = assign_replicas(range(hw.brokers), wl.partitions, wl.replication_factor, 0, 0)
    impact = lose_brokers(placement, lost, min_isr, [Producer("producer", rate * MIB, wl.acks)])
    st.write(f"Offline partitions: **{list(impact.offline) or 'none'}**")
    st.write(f"Under min ISR: **{list(impact.under_min_isr) or 'none'}**")
    seconds = impact.producers[0].seconds_to_block
    verdict = "never blocks" if seconds is None else f"send() blocks after {seconds:,.1f} s"
    st.markdown(f"<div id='verdict'>Producer: {verdict}</div>", unsafe_allow_html=True)


def main() -> None:
    st.title("What if")
    try:
        hw, wl = Hardware(**hardware_inputs()), Workload(**workload_inputs())
        tab_throughput, tab_failure = st.tabs(["Throughput", "Broker failure"])
        with tab_throughput:
            show_throughput(hw, wl)
        with tab_failure:
            show_failure(hw, wl)
    except CapacityError as exc:
        st.error(f"{exc.field.replace('_', ' ')}: {exc.message}")


main()
