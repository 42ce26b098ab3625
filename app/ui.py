"""What every live page shares: the configuration, the Prometheus client, auto-refresh, empty states, and
the header: the alerts firing now and what is unhealthy since when.

The configuration file comes from the ``KOBS_CONFIG`` environment variable (``kobs app --config`` sets
it); without it the demo defaults apply. ``KOBS__APP__PROMETHEUS_URL`` and the other ``KOBS__`` overrides
work as everywhere else.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

import altair as alt
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import CONFIG_ENV, alertmanager, live
from app.prometheus import PrometheusClient, PrometheusUnavailable
from common.config import Config, ConfigError, load_config

WINDOWS = {"15 minutes": 900, "1 hour": 3600, "6 hours": 21600, "1 day": 86400}


def settings() -> Config:
    """The app's configuration; a bad file stops the page with the one-line error."""
    try:
        return load_config(os.environ.get(CONFIG_ENV) or None)
    except ConfigError as exc:
        st.error(str(exc))
        st.stop()
        raise  # unreachable: st.stop() ends the script run


def live_page(title: str, render: Callable[[Config, PrometheusClient], None]) -> None:
    """Title, then ``render`` re-run every ``app.refresh_s``; Prometheus trouble becomes one message."""
    st.title(title)
    config = settings()

    @st.fragment(run_every=config.app.refresh_s)
    def refresh() -> None:
        prom = PrometheusClient(config.app.prometheus_url)
        header(config, prom)
        try:
            render(config, prom)
        except PrometheusUnavailable as exc:
            st.error(str(exc))

    refresh()


def header(config: Config, prom: PrometheusClient) -> None:
    """The alerts that notify people now (Alertmanager), and what is unhealthy since when (Prometheus)."""
    now = time.time()
    with st.container(border=True):
        if config.app.alertmanager_url:
            try:
                alerts = alertmanager.firing(config.app.alertmanager_url)
            except alertmanager.AlertmanagerUnavailable as exc:
                st.warning(str(exc))
            else:
                for severity, text in live.firing_lines(alerts, now):
                    (st.error if severity == "page" else st.warning)(text)
                if not alerts:
                    st.success("No alerts firing.")
        try:
            timed = {words: prom.instant(query) for words, query in live.TIMED_STATES.items()}
            brokers = prom.instant("kobs_broker_up")
            # a producer's series carries its cause broker, which may change: one row per producer
            blocked = prom.instant("max by (cluster, client_id) (kobs_producer_blocked) > 0")
            restarts = planned_restarts(prom)
        except PrometheusUnavailable:  # the page below says so in one line
            st.caption("Health unknown: Prometheus is not answering.")
        else:
            level, sentence = live.unhealthy_sentence(timed, brokers, blocked, restarts)
            show = {"error": st.error, "warning": st.warning, "success": st.success, "info": st.info}[level]
            show(sentence)


def planned_restarts(prom: PrometheusClient) -> pd.DataFrame:
    """The brokers in a planned restart now (``live.planned_restarts``)."""
    return live.planned_restarts({name: prom.instant(query) for name, query in live.RESTART_QUERIES.items()})


def instant(prom: PrometheusClient, config: Config, expr: str, metric: str) -> pd.DataFrame | None:
    """``expr``'s current series, or None after showing why ``metric`` has no data yet."""
    frame = prom.instant(expr)
    if frame.empty:
        up = prom.instant(f'up{{job="{live.EXPORTER_JOB}"}}')
        st.info(live.missing_reason(metric, up, config.sinks.exporter_address))
        return None
    return frame


CELL_BACKGROUNDS = {"green": "#d4edda", "orange": "#ffe8b3", "red": "#f8d7da", "grey": "#e2e3e5"}


def coloured(table: pd.DataFrame, *columns: str) -> pd.io.formats.style.Styler:
    """``table`` for ``st.dataframe`` with its status ``columns`` on the background of their colour."""

    def background(value: object) -> str:
        colour = live.status_colour(value)
        return f"background-color: {CELL_BACKGROUNDS[colour]}" if colour else ""

    # A Styler prints floats with 6 decimals: counts as whole numbers, other figures with 2
    table = live.whole_numbers(table)
    styled = table.style.format(precision=2, na_rep="")
    return styled.map(background, subset=[c for c in columns if c in table.columns])


def window_seconds(key: str) -> int:
    """A time-window picker; returns seconds."""
    return WINDOWS[st.selectbox("Window", list(WINDOWS), index=1, key=key)]


def step_for(seconds: float) -> float:
    """A query_range step giving about 120 points (at least 5 s)."""
    return max(5.0, seconds / 120)


def window_scale(window_s: float) -> alt.Scale:
    """A time axis spanning the last ``window_s`` seconds (UTC, as Prometheus's Unix times)."""
    now = pd.Timestamp.now(tz="UTC").tz_localize(None)
    return alt.Scale(domain=[(now - pd.Timedelta(seconds=window_s)).isoformat(), now.isoformat()])


def timeline(
    frame: pd.DataFrame,
    y: str,
    color: str,
    where: DeltaGenerator | None = None,
    window_s: float | None = None,
    y_title: str | None = None,
    y_format: str | None = None,
) -> None:
    """A line per ``color`` over ``time`` (Unix seconds), with points so that short series show; the time
    axis spans the last ``window_s`` seconds when given, else the data; ``y_format`` is a d3 format
    (``%`` for a ratio as a percentage)."""
    data = frame.assign(time=pd.to_datetime(frame["time"], unit="s"))
    x = alt.X("time:T", scale=window_scale(window_s) if window_s else alt.Undefined)
    axis = alt.Axis(format=y_format) if y_format else alt.Undefined
    y_axis = alt.Y(f"{y}:Q", title=y_title or y, axis=axis)
    chart = alt.Chart(data).mark_line(point=True).encode(x=x, y=y_axis, color=f"{color}:N")
    (where or st).altair_chart(chart, width="stretch")
