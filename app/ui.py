"""What every live page shares: the configuration, the Prometheus client, auto-refresh and empty states.

The configuration file comes from the ``KOBS_CONFIG`` environment variable (``kobs app --config`` sets
it); without it the demo defaults apply. ``KOBS__APP__PROMETHEUS_URL`` and the other ``KOBS__`` overrides
work as everywhere else.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import altair as alt
import pandas as pd
import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from app import CONFIG_ENV, live
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
        try:
            render(config, PrometheusClient(config.app.prometheus_url))
        except PrometheusUnavailable as exc:
            st.error(str(exc))

    refresh()


def instant(prom: PrometheusClient, config: Config, expr: str, metric: str) -> pd.DataFrame | None:
    """``expr``'s current series, or None after showing why ``metric`` has no data yet."""
    frame = prom.instant(expr)
    if frame.empty:
        up = prom.instant(f'up{{job="{live.EXPORTER_JOB}"}}')
        st.info(live.missing_reason(metric, up, config.sinks.exporter_address))
        return None
    return frame


def window_seconds(key: str) -> int:
    """A time-window picker; returns seconds."""
    return WINDOWS[st.selectbox("Window", list(WINDOWS), index=1, key=key)]


def step_for(seconds: float) -> float:
    """A query_range step giving about 120 points (at least 5 s)."""
    return max(5.0, seconds / 120)


def timeline(
    frame: pd.DataFrame,
    y: str,
    color: str,
    where: DeltaGenerator | None = None,
    window_s: float | None = None,
) -> None:
    """A line per ``color`` over ``time`` (Unix seconds), with points so that short series show; the time
    axis spans the last ``window_s`` seconds when given, else the data."""
    data = frame.assign(time=pd.to_datetime(frame["time"], unit="s"))
    scale = alt.Undefined
    if window_s:
        now = pd.Timestamp.now(tz="UTC").tz_localize(None)
        scale = alt.Scale(domain=[(now - pd.Timedelta(seconds=window_s)).isoformat(), now.isoformat()])
    x = alt.X("time:T", scale=scale)
    chart = alt.Chart(data).mark_line(point=True).encode(x=x, y=f"{y}:Q", color=f"{color}:N")
    (where or st).altair_chart(chart, width="stretch")
