"""Producers: which are blocked now, which will block soon (buffer full within 5 minutes), and how full
their buffers have been."""

from __future__ import annotations

import streamlit as st

from app import live, ui
from app.prometheus import PrometheusClient
from common.config import Config

QUERIES = {
    "time_to_block_s": "min by (cluster, client_id) (kobs_producer_time_to_block_seconds)",
    "buffer_used": "max by (cluster, client_id) (kobs_producer_buffer_utilization_ratio)",
}


def render(config: Config, prom: PrometheusClient) -> None:
    blocked = ui.instant(
        prom, config, "max by (cluster, client_id) (kobs_producer_blocked)", "kobs_producer_blocked"
    )
    if blocked is None:
        return
    table = live.producer_states({"blocked": blocked} | {k: prom.instant(q) for k, q in QUERIES.items()})
    cols = st.columns(3)
    cols[0].metric("Producers", len(table))
    cols[1].metric("Blocked", int((table["state"] == "blocked").sum()))
    at_risk = int((table["state"] == "at risk").sum())
    cols[2].metric(f"At risk (< {live.duration_text(live.AT_RISK_S)})", at_risk)
    for _, row in table[table["state"] != "ok"].iterrows():
        say = st.error if row["state"] == "blocked" else st.warning
        when = "send() is blocking now" if row["state"] == "blocked" else f"blocks in {row['blocks in']}"
        say(f"{row['cluster']}/{row['client_id']}: {when}")
    st.dataframe(
        ui.coloured(table[["cluster", "client_id", "state", "blocks in", "buffer_used"]], "state"),
        hide_index=True,
        column_config={"buffer_used": st.column_config.ProgressColumn("buffer used", format="percent")},
    )
    st.subheader("Buffer used over time")
    seconds = ui.window_seconds("producers_window")
    history = prom.range(QUERIES["buffer_used"], seconds, ui.step_for(seconds))
    if history.empty:
        st.info("No buffer history in this window yet.")
        return
    ui.timeline(history, "value", "client_id", window_s=seconds, y_title="buffer used", y_format="%")


ui.live_page("Producers", render)
