"""Consumer lag per group: status, messages, seconds, catch-up ETA and members now (Prometheus), the lag
over time and each partition of a group (the lag job's Parquet history)."""

from __future__ import annotations

import streamlit as st

from app import live, ui
from app.history import read_history
from app.prometheus import PrometheusClient, PrometheusUnavailable
from common.config import Config

GROUP_QUERIES = {
    "status": "max by (cluster, group) (kobs_consumergroup_status)",
    "lag (messages)": "sum by (cluster, group) (kobs_consumergroup_lag_messages)",
    "lag_s": "max by (cluster, group) (kobs_consumergroup_lag_seconds)",
    "eta_s": "max by (cluster, group) (kobs_consumergroup_catchup_eta_seconds)",
    "critical": "max by (cluster, group) (kobs_consumergroup_critical)",
    "members": "max by (cluster, group) (kobs_consumergroup_members)",
}
HISTORY_BATCHES = 720  # newest lag batches read for the timeline


def render(config: Config, prom: PrometheusClient) -> None:
    try:
        groups_now(config, prom)
    except PrometheusUnavailable as exc:  # the history below does not need Prometheus
        st.error(str(exc))
    history(config)


def groups_now(config: Config, prom: PrometheusClient) -> None:
    status = ui.instant(prom, config, GROUP_QUERIES["status"], "kobs_consumergroup_status")
    if status is None:
        return
    frames = {"status": status} | {k: prom.instant(q) for k, q in GROUP_QUERIES.items() if k != "status"}
    table = live.group_table(frames)
    cols = st.columns(3)
    cols[0].metric("Groups", len(table))
    cols[1].metric("Groups not OK", int((table["status"] != "OK").sum()))
    worst = frames["lag_s"]["value"].max() if len(frames["lag_s"]) else None
    cols[2].metric("Worst lag", live.duration_text(worst))
    st.dataframe(ui.coloured(table, "status"), hide_index=True)


def history(config: Config) -> None:
    st.subheader("Lag over time")
    where = config.sinks.history_dir / "lag"
    rows = read_history(config.sinks.history_dir, "lag", last=HISTORY_BATCHES)
    if rows.empty:
        st.info(f"No lag history yet under {where}: is `kobs stream` running?")
        return
    timeline = live.lag_timeline(rows)
    unit = st.radio("Lag in", ["messages", "seconds"], horizontal=True, key="lag_unit")
    ui.timeline(timeline, f"lag_{unit}", "group")
    group = st.selectbox("Partitions of group", sorted(rows["group"].unique()), key="lag_group")
    newest = rows[(rows["batch_id"] == rows["batch_id"].max()) & (rows["group"] == group)]
    newest = newest.assign(partition=newest["partition"].astype(int)).sort_values(["topic", "partition"])
    newest = newest.assign(lag=newest["lag_seconds"].map(live.duration_text))
    columns = ["topic", "partition", "status", "lag_messages", "lag", "lost_messages", "committed"]
    st.dataframe(ui.coloured(newest[[*columns, "end_offset"]], "status"), hide_index=True)


ui.live_page("Consumer lag", render)
