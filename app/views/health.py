"""Cluster health: brokers, controller, the end-to-end canary per broker, partitions in trouble per topic,
the ISR flapping timeline, and whether the pipeline feeding all this is alive."""

from __future__ import annotations

import altair as alt
import pandas as pd
import streamlit as st

from app import live, ui
from app.prometheus import PrometheusClient
from common.config import Config


def render(config: Config, prom: PrometheusClient) -> None:
    reported = brokers_and_controller(config, prom)
    resources(prom)
    canary(prom)
    topics(config, prom, reported)
    st.subheader("Over time")
    seconds = ui.window_seconds("health_window")
    incidents(prom, seconds)
    flapping(prom, seconds)
    pipeline(prom)


def brokers_and_controller(config: Config, prom: PrometheusClient) -> bool:
    """Brokers up and down, planned restarts, offline log directories, the controller and each KRaft
    cluster's quorum. False after saying why there is no ``kobs_broker_up`` yet."""
    up = ui.instant(prom, config, "kobs_broker_up", "kobs_broker_up")
    if up is None:
        return False
    controllers = prom.instant("kobs_cluster_active_controllers")
    healthy, verdict = live.controller_verdict(controllers["value"].sum() if len(controllers) else None)
    restarts = ui.planned_restarts(prom)
    cols = st.columns(3)
    cols[0].metric("Brokers up", f"{int(up['value'].sum())} / {len(up)}")
    cols[1].metric("Active controllers", f"{controllers['value'].sum():.0f}" if len(controllers) else "?")
    down = live.unplanned_down(up, restarts).sort_values(
        ["cluster", "broker"], key=lambda c: c.map(live.natural)
    )
    cols[2].metric(
        "Brokers down", ", ".join(f"{r.cluster} broker {r.broker}" for r in down.itertuples()) or "none"
    )
    for level, line in live.restart_lines(restarts):  # planned restarts: not down, but no redundancy either
        (st.error if level == "error" else st.warning)(line)
    if offline := live.offline_log_dirs(prom.instant(live.RESOURCE_QUERIES["offline log dirs"])):
        st.error(offline)
    (st.success if healthy else st.error)(f"Controller: {verdict}")
    quorum = {name: prom.instant(query) for name, query in live.QUORUM_QUERIES.items()}
    for level, line in live.quorum_lines(quorum):
        {"error": st.error, "warning": st.warning, "success": st.success}[level](line)
    return True


def resources(prom: PrometheusClient) -> None:
    """How busy each broker is: CPU, heap, GC, its thread pools' idle share, requests and errors, Produce
    p99, the request queue, offline log directories and how old its metadata is."""
    st.subheader("Broker resources")
    frames = {name: prom.instant(query) for name, query in live.RESOURCE_QUERIES.items()}
    if all(f.empty for f in frames.values()):
        st.info(
            "No broker resources: they come from the brokers' JMX (`clusters[].jmx`) through `kobs stream`."
        )
        return
    table = live.resource_table(frames)
    if busy := live.saturated(table):
        st.warning(f"Thread pools idle less than {live.SATURATED_IDLE:.0%}: {', '.join(busy)}")
    formats = {"CPU cores": "%.2f", "requests/s": "%.0f", "errors/s": "%.1f"}
    formats |= dict.fromkeys(("request queue", "offline log dirs"), "%d")
    formats |= dict.fromkeys(("heap used", "time in GC", "handlers idle", "network idle"), "percent")
    columns = {name: st.column_config.NumberColumn(name, format=f) for name, f in formats.items()}
    st.dataframe(table, hide_index=True, column_config=columns)


def canary(prom: PrometheusClient) -> None:
    """What a client of each broker sees: the end-to-end canary's messages read back, lost, and latency."""
    st.subheader("End-to-end canary")
    frames = {name: prom.instant(query) for name, query in live.CANARY_QUERIES.items()}
    if all(f.empty for f in frames.values()):
        st.info(
            "No canary data: `kobs collect` runs one for each cluster with `bootstrap_servers` "
            "(`clusters[].canary`); does Prometheus scrape it (job kobs-collector)?"
        )
        return
    table = live.canary_table(frames)
    losing = table[table["lost"] > 0]
    if losing.empty:
        st.success("Every broker's canary messages were read back in the last 2 minutes.")
    else:
        names = ", ".join(f"{r.cluster} broker {r.broker} ({r.lost})" for r in losing.itertuples())
        st.error(f"Canary messages lost in the last 2 minutes: {names}")
    st.dataframe(
        table,
        hide_index=True,
        # green over half, red under: by default the theme's primary colour, red, made 100 % read as trouble
        column_config={
            "delivered": st.column_config.ProgressColumn("delivered", format="percent", color="auto")
        },
    )


def topics(config: Config, prom: PrometheusClient, reported: bool) -> None:
    """Partition states per topic; without any, why (unless the brokers above said why already)."""
    st.subheader("Partitions per topic")
    frames = {label: prom.instant(query) for label, query in live.TOPIC_QUERIES.items()}
    if all(f.empty for f in frames.values()):
        if reported:
            ui.instant(prom, config, live.TOPIC_QUERIES["offline"], "kobs_topic_offline_partitions")
        else:
            st.info("No partition states yet either.")
        return
    table = live.topic_health(frames)
    trouble = table[~table["healthy"]]
    if trouble.empty:
        st.success("Every partition has a leader and a full ISR.")
    else:
        st.error(f"Topics in trouble: {', '.join(map(live.plain, trouble['topic']))}")
    columns = {
        "one replica from min ISR": st.column_config.NumberColumn(
            help="Under-replicated partitions whose ISR is down to min.insync.replicas: one more replica "
            "out and acks=all producers fail"
        ),
        "reassigning": st.column_config.NumberColumn(
            help="Partitions adding replicas (a reassignment): not all in the ISR yet, not under-replicated"
        ),
    }
    st.dataframe(ui.coloured(table, "healthy"), hide_index=True, column_config=columns)


def incidents(prom: PrometheusClient, seconds: int) -> None:
    """Brokers down, planned restarts, partitions offline or under-replicated, producers blocked: since when,
    until when."""
    step = ui.step_for(seconds)
    ranges = {kind: prom.range(q, seconds, step) for kind, (q, _, _) in live.INCIDENT_QUERIES.items()}
    spans = live.incident_spans(ranges, step)
    st.caption(
        "Incident timeline: brokers down, planned restarts, partitions offline or under-replicated, "
        "producers blocked"
    )
    if spans.empty:
        st.success("No incident in this window.")
        return
    data = spans.assign(
        start=pd.to_datetime(spans["start"], unit="s"), end=pd.to_datetime(spans["end"], unit="s")
    )
    colours = alt.Scale(domain=list(live.INCIDENT_COLOURS), range=list(live.INCIDENT_COLOURS.values()))
    chart = (
        alt.Chart(data)
        .mark_bar()
        .encode(
            x=alt.X("start:T", title="time", scale=ui.window_scale(seconds)),
            x2="end:T",
            y=alt.Y("what:N", title=None, sort=alt.EncodingSortField("start")),
            color=alt.Color("kind:N", scale=colours),
            tooltip=["what", "start:T", "end:T"],
        )
    )
    st.altair_chart(chart, width="stretch")


def flapping(prom: PrometheusClient, seconds: int) -> None:
    step = ui.step_for(seconds)
    flaps = prom.range("sum by (broker) (kobs_isr_flapping_partitions)", seconds, step)
    changes_expr = f"sum by (change) (increase(kobs_isr_changes_total[{step * 2:.0f}s]))"
    changes = prom.range(changes_expr, seconds, step)
    if flaps.empty and changes.empty:
        st.info("No ISR history in this window yet.")  # why: the sections above, when nothing arrived
        return
    left, right = st.columns(2)
    left.caption("Flapping partitions per broker (left and rejoined the ISR ≥ 3 times in 10 min)")
    ui.timeline(flaps, "value", "broker", left, seconds, y_title="flapping partitions", y_format="d")
    right.caption(f"ISR changes per {live.duration_text(step)}, by kind")
    changes = changes.assign(
        time=pd.to_datetime(changes["time"], unit="s"), value=changes["value"].astype(float).round()
    )
    counts = alt.Axis(format="d", tickMinStep=1)  # whole changes, never "0.000000"
    chart = (
        alt.Chart(changes)
        .mark_bar()
        .encode(
            x=alt.X("time:T", scale=ui.window_scale(seconds)),
            y=alt.Y("value:Q", title="changes", axis=counts),
            color="change:N",
        )
    )
    right.altair_chart(chart, width="stretch")


def pipeline(prom: PrometheusClient) -> None:
    st.subheader("Is data arriving?")
    sources = prom.instant("time() - kobs_source_last_seen_timestamp_seconds")
    batches = prom.instant("time() - kobs_pipeline_last_batch_timestamp_seconds")
    scrapes = prom.instant("sum by (source) (rate(kobs_collector_scrape_duration_seconds_count[5m])) * 60")
    if sources.empty and batches.empty and scrapes.empty:
        st.info(
            "Nothing from the pipeline yet: are `kobs collect` and `kobs stream` running, and does "
            "Prometheus scrape them (jobs kobs-collector and kobs-exporter)?"
        )
        return
    left, right = st.columns(2)
    if len(scrapes):
        left.caption("Collector scrapes per minute by source (kobs collect, last 5 minutes)")
        left.bar_chart(scrapes, x="source", y="value", horizontal=True)
    ages = [(f"source {r.get('source', '?')}", r["value"]) for _, r in sources.iterrows()] + [
        (f"query {r.get('query', '?')}", r["value"]) for _, r in batches.iterrows()
    ]
    if ages:
        right.caption("Seconds since the newest data")
        right.dataframe(
            {"what": [a for a, _ in ages], "age": [live.duration_text(s) for _, s in ages]}, hide_index=True
        )


ui.live_page("Cluster health", render)
