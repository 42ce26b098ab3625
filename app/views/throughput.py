"""Throughput versus stored data: per-broker scatter with the regression line (Kafka's throughput should
not depend on how much it stores), per-topic rates, and each broker's disk runway."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from app import live, ui
from app.history import read_history
from app.prometheus import PrometheusClient, PrometheusUnavailable
from common.config import Config

TOPIC_METRICS = {
    "in MB/s": "kobs_topic_bytes_in_per_second / 1e6",
    "out MB/s": "kobs_topic_bytes_out_per_second / 1e6",
    "stored GB": "kobs_topic_stored_bytes / 1e9",
}
HISTORY_BATCHES = 2000


def render(config: Config, prom: PrometheusClient) -> None:
    scatter(config, prom)
    try:
        runway(config, prom)
        topics(prom)
    except PrometheusUnavailable as exc:
        st.error(str(exc))


def scatter(config: Config, prom: PrometheusClient) -> None:
    st.subheader("Produce throughput versus stored data, per broker")
    rows = read_history(config.sinks.history_dir, live.THROUGHPUT_TABLE, last=HISTORY_BATCHES)
    missing = [c for c in live.THROUGHPUT_COLUMNS if c not in rows.columns]
    if rows.empty or missing:
        where = config.sinks.history_dir / live.THROUGHPUT_TABLE
        st.info(f"No throughput history yet under {where}: is `kobs stream` running its throughput job?")
        return
    points = live.broker_points(rows)
    fit = live.fit_line(points["stored GB"], points["MB/s in"])
    chart = alt.Chart(points).mark_circle(size=60).encode(x="stored GB:Q", y="MB/s in:Q", color="broker:N")
    if fit:
        ends = points["stored GB"].agg(["min", "max"]).to_numpy()
        line = pd.DataFrame({"stored GB": ends, "MB/s in": fit.slope * ends + fit.intercept})
        chart += alt.Chart(line).mark_line(color="black").encode(x="stored GB:Q", y="MB/s in:Q")
    st.altair_chart(chart, width="stretch")
    st.markdown(f"**Regression** — {live.fit_verdict(fit)}")
    correlation = prom.instant("kobs_cluster_throughput_stored_correlation") if fit else pd.DataFrame()
    if len(correlation):
        st.caption(f"Streaming job's 6-hour correlation: {correlation['value'].iloc[0]:.2f}")


def runway(config: Config, prom: PrometheusClient) -> None:
    st.subheader("Disk runway per broker")
    unsized = [c.name for c in config.clusters if c.broker_disk_bytes is None]
    if len(unsized) == len(config.clusters):
        st.info(
            "No disk runway: it needs each broker's disk size. Set broker_disk_bytes for the cluster(s) "
            f"{', '.join(unsized)} in the configuration."
        )
        return
    days = ui.instant(prom, config, "kobs_broker_disk_runway_days", "kobs_broker_disk_runway_days")
    if days is None:
        return
    table = live.runway_table(days, prom.instant("kobs_broker_stored_bytes"))
    low = table[table["low"]]
    if len(low):
        st.error(f"Disks fill within {live.RUNWAY_LOW_DAYS:.0f} days on broker(s) {', '.join(low['broker'])}")
    left, right = st.columns(2)
    left.dataframe(table[["cluster", "broker", "stored GB", "disks full in"]], hide_index=True)
    right.bar_chart(table, x="broker", y="stored GB", horizontal=True)


def topics(prom: PrometheusClient) -> None:
    st.subheader("Per topic")
    table = live.wide({label: prom.instant(q) for label, q in TOPIC_METRICS.items()}, ["cluster", "topic"])
    if table.empty:
        st.info("No per-topic throughput yet: the throughput job has not reported.")
        return
    st.dataframe(table.sort_values("in MB/s", ascending=False), hide_index=True)


ui.live_page("Throughput versus stored data", render)
