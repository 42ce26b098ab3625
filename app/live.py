"""Pure shaping for the live pages: Prometheus frames, Alertmanager's alerts and history rows in; tables,
verdicts, fits and the header's sentences out.

No Streamlit and no I/O here, so every decision a page shows (status names, who is at risk, the regression
line, what is missing and why, what fires since when) is tested fast. Thresholds are the alert rules' own
(``alerts/*.rules.yml``, read once at import).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from alerts.thresholds import shipped_line
from app.alertmanager import Firing
from common.metrics import GROUP_STATUS, GROUP_STATUS_COLOURS

STATUS_NAME = {code: name for name, code in GROUP_STATUS.items()}
# A status cell's colour, as the dashboards colour the same states (a healthy flag: True green, False red).
STATUS_COLOURS = GROUP_STATUS_COLOURS | {
    "ok": "green", "at risk": "orange", "blocked": "red", "unknown": "grey",
}  # fmt: skip
AT_RISK_S = shipped_line("KafkaProducerAtRisk", "kobs_producer_time_to_block_seconds").value  # 5 minutes
RUNWAY_LOW_DAYS = shipped_line("KafkaDiskRunwayLow", "kobs_broker_disk_runway_days").value  # 7 days
# Partition states timed per topic, for the header's "since when": words -> query of the topics in that state
# and for how long. A topic has one series per cause broker: its time is the longest of them.
TIMED_STATES = {
    "offline": "max by (cluster, topic) (kobs_topic_offline_seconds) > 0",
    "under min ISR": "max by (cluster, topic) (kobs_topic_under_min_isr_seconds) > 0",
    "under-replicated": "max by (cluster, topic) (kobs_topic_under_replicated_seconds) > 0",
}
# The partitions-per-topic table: column -> instant query by (cluster, topic). The replication states have
# one series per cause broker (docs/metrics.md): a topic's count is their sum.
TOPIC_QUERIES = {
    "offline": "sum by (cluster, topic) (kobs_topic_offline_partitions)",
    "under min ISR": "sum by (cluster, topic) (kobs_topic_under_min_isr_partitions)",
    "one replica from min ISR": "sum by (cluster, topic) (kobs_topic_shrunk_to_min_isr_partitions)",
    "under-replicated": "sum by (cluster, topic) (kobs_topic_under_replicated_partitions)",
    "reassigning": "sum by (cluster, topic) (kobs_topic_reassigning_partitions)",
    "replication factor": "min by (cluster, topic) (kobs_topic_replication_factor)",
}
# Columns of the table that are no trouble: a reassignment adding replicas leaves every partition in sync.
NOT_TROUBLE = ("reassigning", "replication factor")
# A broker's planned restart (spark_jobs/maintenance.py) and what the on-call asks of it: column -> instant
# query by (cluster, broker).
RESTART_QUERIES = {
    "maintenance": "max by (cluster, broker) (kobs_broker_maintenance)",
    "seconds": "max by (cluster, broker) (kobs_broker_maintenance_seconds)",
    "up": "min by (cluster, broker) (kobs_broker_up)",
    "out of ISR": "max by (cluster, broker) (kobs_broker_out_of_isr_partitions)",
    "leads": "max by (cluster, broker) (kobs_broker_leader_partitions)",
}
PLANNED, OVERDUE = 1, 2  # kobs_broker_maintenance: in a planned restart, and past its grace (it pages)
EXPORTER_JOB = "kobs-exporter"
# What Markdown reads inside a line (emphasis, code, links and Streamlit's :colour[...] directives, HTML,
# strikethrough, LaTeX), each escaped by a backslash as CommonMark allows
MARKDOWN_SIGNS = re.compile(r"([\\`*_\[\]<>~$])")
# GitHub-flavoured Markdown links bare https://..., www.... and e-mail addresses whatever their escapes: an
# invisible zero-width space in "://", "www." and before "@" breaks them
AUTOLINKED = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)
# Columns the throughput history table must have for the stored-data scatter (one row per broker and time).
THROUGHPUT_TABLE = "throughput"
THROUGHPUT_COLUMNS = ("cluster", "broker", "topic", "at_s", "bytes_in_per_s", "stored_bytes")


def duration_text(seconds: float | None) -> str:
    """A duration for people: ``never`` for +Inf, ``unknown`` for missing, else s, min, h or days."""
    if seconds is None or math.isnan(seconds):
        return "unknown"
    if math.isinf(seconds):
        return "never"
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def latency_text(seconds: float | None) -> str:
    """A latency for people: milliseconds under a second, else as :func:`duration_text`."""
    if seconds is not None and 0 <= seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return duration_text(seconds)


# The canary per cluster and broker (the broker its partition is meant to be led by): messages read back and
# lost over KafkaCanaryUnavailable's window, and the 99th percentile latencies over 5 minutes.
CANARY_QUERIES = {
    "read back": "sum by (cluster, broker) (increase(kobs_canary_messages_received_total[2m]))",
    "lost": "sum by (cluster, broker) (increase(kobs_canary_messages_lost_total[2m]))",
    "end-to-end p99": "histogram_quantile(0.99, sum by (cluster, broker, le) "
    "(rate(kobs_canary_end_to_end_latency_seconds_bucket[5m])))",
    "produce p99": "histogram_quantile(0.99, sum by (cluster, broker, le) "
    "(rate(kobs_canary_produce_latency_seconds_bucket[5m])))",
}


# Each broker's resources (spark_jobs/brokers.py): column -> instant query by (cluster, broker).
RESOURCE_QUERIES = {
    "CPU cores": "max by (cluster, broker) (kobs_broker_cpu_cores)",
    "heap used": "max by (cluster, broker) (kobs_broker_heap_used_bytes)"
    " / max by (cluster, broker) (kobs_broker_heap_max_bytes)",
    "time in GC": "max by (cluster, broker) (kobs_broker_gc_time_ratio)",
    "handlers idle": "min by (cluster, broker) (kobs_broker_request_handler_idle_ratio)",
    "network idle": "min by (cluster, broker) (kobs_broker_network_processor_idle_ratio)",
    "requests/s": "sum by (cluster, broker) (kobs_broker_requests_per_second)",
    "errors/s": "sum by (cluster, broker) (kobs_broker_request_errors_per_second)",
    "produce p99": "max by (cluster, broker) "
    '(kobs_broker_request_latency_seconds{request="Produce",stage="total",quantile="0.99"})',
    "request queue": "max by (cluster, broker) (kobs_broker_request_queue_size)",
    "offline log dirs": "max by (cluster, broker) (kobs_broker_offline_log_dirs)",
    "metadata age": "max by (cluster, broker) (kobs_broker_metadata_lag_seconds)",
}
SATURATED_IDLE = 0.2  # thread pools idle less than this are short of threads or CPU (docs/metrics.md)
# Resource columns of seconds, shown in words (latency_text)
TIMES = ("produce p99", "metadata age")
OFFLINE_LOG_DIRS = shipped_line("KafkaOfflineLogDirectory", "kobs_broker_offline_log_dirs")  # > 0 pages
# The KRaft controller quorum per cluster (spark_jobs' quorum analysis): name -> instant query by cluster.
QUORUM_QUERIES = {
    "leader": "max by (cluster) (kobs_quorum_leader)",
    "epoch": "max by (cluster) (kobs_quorum_epoch)",
    "voters": "max by (cluster) (kobs_quorum_voters)",
    "leaderless": "max by (cluster) (kobs_quorum_leaderless_seconds)",
}
LEADERLESS = shipped_line("KafkaQuorumLeaderless", "kobs_quorum_leaderless_seconds")  # > 30 s pages


def resource_table(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per cluster and broker: its resources (TIMES in words, empty where unknown), the brokers whose
    request handlers idle least first."""
    table = wide(frames, ["cluster", "broker"]).reindex(columns=["cluster", "broker", *RESOURCE_QUERIES])
    table = table.sort_values(["handlers idle", "cluster", "broker"], na_position="last")
    for name in TIMES:
        table[name] = table[name].map(lambda s: None if pd.isna(s) else latency_text(s))
    return table.reset_index(drop=True)


def saturated(table: pd.DataFrame) -> list[str]:
    """'<cluster> broker <id> (<pool> <idle>%)' for each thread pool idle less than SATURATED_IDLE."""
    found = []
    for row in table.to_dict("records"):
        for pool in ("handlers idle", "network idle"):
            if row[pool] < SATURATED_IDLE:  # NaN (unknown) is never below
                found.append(f"{row['cluster']} broker {row['broker']} ({pool} {row[pool]:.0%})")
    return found


def canary_table(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per cluster and broker: the share of the canary's messages read back in the last 2 minutes (NaN
    before any was due), the messages lost, latencies in words; brokers losing messages first."""
    table = wide(frames, ["cluster", "broker"])
    read, lost = table["read back"].fillna(0), table["lost"].fillna(0)
    table["delivered"] = (read / (read + lost)).where(read + lost > 0)
    table["lost"] = lost.round().astype(int)
    for name in ("end-to-end p99", "produce p99"):
        table[name] = table[name].map(lambda s: latency_text(None if pd.isna(s) else s))
    table = table.sort_values(["lost", "cluster", "broker"], ascending=[False, True, True])
    return table[["cluster", "broker", "delivered", "lost", "end-to-end p99", "produce p99"]].reset_index(
        drop=True
    )


def wide(frames: Mapping[str, pd.DataFrame], keys: Sequence[str]) -> pd.DataFrame:
    """Instant-query frames joined on ``keys``: one column per name, holding each frame's ``value``."""
    joined: pd.DataFrame | None = None
    for name, frame in frames.items():
        part = frame.reindex(columns=[*keys, "value"]).rename(columns={"value": name})
        joined = part if joined is None else joined.merge(part, on=list(keys), how="outer")
    return joined if joined is not None else pd.DataFrame(columns=list(keys))


def missing_reason(metric: str, exporter_up: pd.DataFrame, exporter_address: str) -> str:
    """Why Prometheus has no ``metric`` yet, from ``up{job="kobs-exporter"}``: the sentence a page shows."""
    if exporter_up.empty:
        return (
            f"No `{metric}` yet: Prometheus does not scrape the kobs exporter — add {exporter_address} "
            f"to its scrape targets as job `{EXPORTER_JOB}`."
        )
    if not (exporter_up["value"] == 1).any():
        return (
            f"No `{metric}` yet: Prometheus cannot reach the kobs exporter at {exporter_address} — "
            "is `kobs stream` running?"
        )
    return f"No `{metric}` yet: the kobs exporter is up but the job deriving it has not reported yet."


def controller_verdict(active: float | None) -> tuple[bool, str]:
    """(healthy, sentence) for ``kobs_cluster_active_controllers``: exactly one is healthy."""
    if active is None:
        return False, "controller unknown"
    if active == 1:
        return True, "one active controller"
    if active == 0:
        return False, "no active controller: leader elections cannot happen"
    return False, f"{active:.0f} brokers claim to be controller (split brain)"


def quorum_lines(frames: Mapping[str, pd.DataFrame]) -> list[tuple[str, str]]:
    """(level, sentence) per cluster with quorum series (frames of QUORUM_QUERIES; ZooKeeper-mode clusters
    have none): error once leaderless past LEADERLESS (it pages), warning while electing a leader, else
    success naming the leader, epoch and voters."""
    table = wide(frames, ["cluster"]).reindex(columns=["cluster", *QUORUM_QUERIES])
    lines = []
    for r in table.sort_values("cluster").to_dict("records"):
        name, leaderless = plain(r["cluster"]), r["leaderless"]
        if leaderless > 0:  # NaN (unknown) is never above
            level = "error" if LEADERLESS.crossed(leaderless) else "warning"
            state = "has had no leader" if level == "error" else "has been electing a leader"
            lines.append((level, f"{name}: the controller quorum {state} for {duration_text(leaderless)}"))
        else:
            leader, epoch, voters = _number(r["leader"]), _number(r["epoch"]), _count(r["voters"], "voter")
            lines.append(("success", f"{name}: quorum leader node {leader}, epoch {epoch}, {voters}"))
    return lines


def offline_log_dirs(frame: pd.DataFrame) -> str | None:
    """The sentence naming each broker with offline log directories (past OFFLINE_LOG_DIRS: it pages) and how
    many, from the frame of ``RESOURCE_QUERIES["offline log dirs"]``; None when there is none."""
    rows = [r for r in frame.to_dict("records") if OFFLINE_LOG_DIRS.crossed(r["value"])]
    if not rows:
        return None
    rows.sort(key=lambda r: (natural(r["cluster"]), natural(r["broker"])))
    names = ", ".join(f"{plain(r['cluster'])} broker {r['broker']} ({r['value']:.0f})" for r in rows)
    return f"Offline log directories: {names}"


def natural(value: str) -> tuple[int, str]:
    """Broker ids in number order (2 before 10), cluster names in text order."""
    return (int(value), "") if value.isdigit() else (0, value)


def status_colour(value: object) -> str | None:
    """The colour of a status cell (``STATUS_COLOURS``); None for a value that is no status."""
    if isinstance(value, bool | np.bool_):
        return "green" if value else "red"
    return STATUS_COLOURS.get(value) if isinstance(value, str) else None


def whole_numbers(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with every float column whose values are all whole (or missing) as integers: counts read
    from Prometheus arrive as floats (``1200.0`` messages, ``3.0`` members)."""
    whole = {
        c: "Int64"
        for c in table.columns
        if pd.api.types.is_float_dtype(table[c]) and (table[c].dropna() % 1 == 0).all()
    }
    return table.astype(whole)


def topic_health(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-topic replication table (one column per metric), topics in trouble first."""
    table = wide(frames, ["cluster", "topic"]).fillna(0)
    trouble = [c for c in table.columns if c not in ("cluster", "topic", *NOT_TROUBLE)]
    table["healthy"] = (table[trouble] == 0).all(axis=1)
    return table.sort_values(["healthy", "cluster", "topic"]).reset_index(drop=True)


def group_table(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-group lag table from per-group frames ``status``, ``eta_s`` (and optional ``lag_s``, lag sums,
    ``critical`` and ``members``): status named, lag and ETA in words, worst groups first."""
    table = wide(frames, ["cluster", "group"])
    codes = table["status"].fillna(-1)
    table["status"] = codes.map(lambda c: STATUS_NAME.get(int(c), "unknown"))
    if "lag_s" in table:
        table["lag"] = table.pop("lag_s").map(lambda s: duration_text(None if pd.isna(s) else s))
    table["catch-up ETA"] = table["eta_s"].map(lambda s: duration_text(None if pd.isna(s) else s))
    if "critical" in table:
        table["critical"] = table["critical"].fillna(0) >= 1
    table["_order"] = -codes
    return table.sort_values(["_order", "cluster", "group"]).drop(columns=["_order", "eta_s"])


def lag_timeline(history: pd.DataFrame) -> pd.DataFrame:
    """Lag history rows (spark_jobs/lag.py) summed per group and evaluation time: ``time`` (Unix s),
    ``group``, ``lag_messages`` (sum over partitions), ``lag_seconds`` (worst partition)."""
    if history.empty:
        return pd.DataFrame(columns=["time", "group", "lag_messages", "lag_seconds"])
    per_time = history.groupby(["cluster", "group", "at_s"], as_index=False).agg(
        lag_messages=("lag_messages", "sum"), lag_seconds=("lag_seconds", "max")
    )
    per_time = per_time.rename(columns={"at_s": "time"})
    return per_time[["time", "group", "lag_messages", "lag_seconds"]].sort_values(["group", "time"])


def producer_states(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """Per-producer table from ``blocked``, ``time_to_block_s`` and ``buffer_used``: ``state`` is blocked,
    at risk (buffer full within AT_RISK_S) or ok; blocked first, then soonest to block."""
    table = wide(frames, ["cluster", "client_id"])
    ttb = table["time_to_block_s"].fillna(math.inf)
    table["state"] = np.where(
        table["blocked"].fillna(0) >= 1, "blocked", np.where(ttb < AT_RISK_S, "at risk", "ok")
    )
    table["blocks in"] = ttb.map(duration_text)
    order = table["state"].map({"blocked": 0, "at risk": 1, "ok": 2})
    return table.assign(_o=order, _t=ttb).sort_values(["_o", "_t", "client_id"]).drop(columns=["_o", "_t"])


def broker_points(rows: pd.DataFrame) -> pd.DataFrame:
    """The scatter's points from throughput history: each broker's own rows (``topic`` null), never its
    per-topic rows, as ``stored GB``, ``MB/s in`` and ``broker``."""
    own = rows[rows["topic"].isna()]
    return pd.DataFrame(
        {
            "stored GB": own["stored_bytes"] / 1e9,
            "MB/s in": own["bytes_in_per_s"] / 1e6,
            "broker": own["broker"].astype(str),
        }
    ).reset_index(drop=True)


@dataclass(frozen=True)
class Fit:
    """Least-squares line ``y = slope * x + intercept`` and Pearson's ``r`` (nan when y is constant)."""

    slope: float
    intercept: float
    r: float


def fit_line(x: Sequence[float], y: Sequence[float]) -> Fit | None:
    """The regression of ``y`` on ``x`` over the points where both are known; None with fewer than two
    distinct x values there (no verdict from missing data)."""
    xs, ys = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    known = np.isfinite(xs) & np.isfinite(ys)
    xs, ys = xs[known], ys[known]
    if len(xs) < 2 or np.ptp(xs) == 0:
        return None
    dx, dy = xs - xs.mean(), ys - ys.mean()
    slope = float((dx * dy).sum() / (dx * dx).sum())
    spread = math.sqrt(float((dx * dx).sum() * (dy * dy).sum()))
    r = float((dx * dy).sum() / spread) if spread else math.nan
    return Fit(slope, float(ys.mean() - slope * xs.mean()), r)


def fit_verdict(fit: Fit | None) -> str:
    """What the fit says about Kafka: throughput should not depend on stored data (LinkedIn's flat line)."""
    if fit is None:
        return "not enough points for a regression yet"
    if not math.isnan(fit.r) and fit.r <= -0.5:
        return (
            f"throughput falls as stored data grows (r = {fit.r:.2f}): check the page cache, "
            "consumers reading cold segments and retention"
        )
    return "throughput does not fall with stored data, as expected of Kafka" + (
        "" if math.isnan(fit.r) else f" (r = {fit.r:.2f})"
    )


def runway_table(runway_days: pd.DataFrame, stored_bytes: pd.DataFrame) -> pd.DataFrame:
    """Per-broker stored GB and disk runway (words and ``low`` below RUNWAY_LOW_DAYS), shortest first."""
    table = wide({"runway_days": runway_days, "stored_bytes": stored_bytes}, ["cluster", "broker"])
    table["stored GB"] = table["stored_bytes"] / 1e9
    days = table["runway_days"]
    table["disks full in"] = days.map(lambda d: duration_text(None if pd.isna(d) else d * 86400))
    table["low"] = days < RUNWAY_LOW_DAYS
    return table.sort_values(["runway_days", "broker"]).drop(columns=["stored_bytes"])


def plain(text: str) -> str:
    """``text`` (a name from Kafka, an alert's words) shown as written where Streamlit renders Markdown
    inside a sentence (:data:`MARKDOWN_SIGNS` escaped, :data:`AUTOLINKED` broken)."""
    return AUTOLINKED.sub("\u200b", MARKDOWN_SIGNS.sub(r"\\\1", text))


def firing_lines(alerts: Sequence[Firing], now_s: float) -> list[tuple[str, str]]:
    """(severity, markdown sentence) per firing alert for the header: pages first, then the longest firing;
    the alert's name links its runbook; its words (which carry topic and group names) show as written."""
    ordered = sorted(alerts, key=lambda a: (a.severity != "page", a.since_s, a.alertname))
    return [
        (
            a.severity,
            f"{f'[{plain(a.alertname)}]({a.runbook_url})' if a.runbook_url else plain(a.alertname)} "
            f"({a.severity}): {plain(a.summary or 'no summary')} — for "
            f"{duration_text(max(now_s - a.since_s, 0.0))}",
        )
        for a in ordered
    ]


def planned_restarts(frames: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
    """The brokers in a planned restart (``kobs_broker_maintenance`` at least PLANNED), one row each with the
    columns of RESTART_QUERIES (NaN where unknown): overdue first, then the longest away."""
    table = wide(frames, ["cluster", "broker"]).reindex(columns=["cluster", "broker", *RESTART_QUERIES])
    table = table[table["maintenance"] >= PLANNED]
    return table.sort_values(["maintenance", "seconds"], ascending=False).reset_index(drop=True)


def unplanned_down(up: pd.DataFrame, restarts: pd.DataFrame) -> pd.DataFrame:
    """The ``kobs_broker_up`` rows of brokers down outside a planned restart (rows of planned_restarts):
    outages, which page at once."""
    planned = pd.MultiIndex.from_frame(restarts[["cluster", "broker"]])
    return up[(up["value"] < 1) & ~pd.MultiIndex.from_frame(up[["cluster", "broker"]]).isin(planned)]


def _number(n: float) -> str:
    """A whole number from Prometheus (a node id, an epoch), ``?`` when unknown."""
    return "?" if pd.isna(n) else f"{n:.0f}"


def _count(n: float, noun: str) -> str:
    """``n`` things in words: ``1 partition``, ``12 partitions``, ``? partitions`` when unknown."""
    return f"? {noun}s" if pd.isna(n) else f"{n:.0f} {noun}{'' if n == 1 else 's'}"


def restart_lines(restarts: pd.DataFrame) -> list[tuple[str, str]]:
    """(level, sentence) per broker in a planned restart (rows of planned_restarts): while away, how long and
    how many partitions it still leads; once back, how many ISRs it has yet to rejoin. Level is error when
    overdue (past alerts.maintenance_grace_s: it pages), else warning."""
    lines = []
    for r in restarts.to_dict("records"):
        overdue = r["maintenance"] >= OVERDUE
        what = f"{r['cluster']} broker {r['broker']}: planned restart{' overdue' if overdue else ''}"
        since = duration_text(r["seconds"])
        if r["up"] >= 1:
            state = f"back, catching up: out of {_count(r['out of ISR'], 'ISR')}, {since} since it left"
        else:
            state = f"away {since}, leads {_count(r['leads'], 'partition')}"
        lines.append(("error" if overdue else "warning", f"{what}, {state}"))
    return lines


def unhealthy_sentence(
    timed: Mapping[str, pd.DataFrame], brokers: pd.DataFrame, blocked: pd.DataFrame, restarts: pd.DataFrame
) -> tuple[str, str]:
    """(level, markdown sentence, names as written) of what is unhealthy now: each topic's partition
    states with the time in them (frames of TIMED_STATES, by its words), longest first; brokers down
    outside a planned restart (of all ``kobs_broker_up``); blocked producers; then the brokers in a
    planned restart (rows of planned_restarts), never called down. Level is error; warning when all there
    is is planned restarts within their grace; success; or info when no broker series exists: the pipeline
    has not reported, and health is unknown, not good."""
    if brokers.empty:
        return "info", "Health unknown: no kobs_broker_up from Prometheus yet."
    rows = [
        (r["value"], f"{plain(r['cluster'])}/{plain(r['topic'])} {words} for {duration_text(r['value'])}")
        for words, frame in timed.items()
        for r in frame.to_dict("records")
        if r["value"] > 0
    ]
    said = [text for _, text in sorted(rows, key=lambda row: -row[0])]
    said += [
        f"{plain(r['cluster'])} broker {r['broker']} down"
        for r in unplanned_down(brokers, restarts).to_dict("records")
    ]
    said += [
        f"{plain(r['cluster'])}/{plain(r['client_id'])} blocked in send()" for r in blocked.to_dict("records")
    ]
    planned = [
        f"{plain(r['cluster'])} broker {r['broker']} in a planned restart for {duration_text(r['seconds'])}"
        + (", overdue" if r["maintenance"] >= OVERDUE else "")
        for r in restarts.to_dict("records")
    ]
    if not said and not planned:
        return "success", "Nothing unhealthy now."
    level = "error" if said or (restarts["maintenance"] >= OVERDUE).any() else "warning"
    return level, "Unhealthy now: " + "; ".join(said + planned)


# What the incident timeline draws: query over the window, when a sample is trouble, how to name the series.
# A broker down during its planned restart (within its grace) is that restart, not an outage: "broker down"
# leaves those out.
INCIDENT_QUERIES = {
    "broker down": (
        "min by (cluster, broker) (kobs_broker_up)"
        " unless on (cluster, broker) (kobs_broker_maintenance == 1)",
        lambda v: v < 1,
        "{cluster} broker {broker} down",
    ),
    "planned restart": (
        "max by (cluster, broker) (kobs_broker_maintenance)",
        lambda v: v >= PLANNED,
        "{cluster} broker {broker} planned restart",
    ),
    "offline": (
        "sum by (cluster, topic) (kobs_topic_offline_partitions)",
        lambda v: v > 0,
        "{cluster}/{topic} offline",
    ),
    "under-replicated": (
        "sum by (cluster, topic) (kobs_topic_under_replicated_partitions)",
        lambda v: v > 0,
        "{cluster}/{topic} under-replicated",
    ),
    "producer blocked": (
        "max by (cluster, client_id) (kobs_producer_blocked)",
        lambda v: v > 0,
        "{cluster}/{client_id} blocked",
    ),
}
# Each kind's colour on the timeline: outages red, under-replication orange, planned restarts blue (as the
# dashboards colour a planned restart).
INCIDENT_COLOURS = {
    "broker down": "#d62728",
    "planned restart": "#1f77b4",
    "offline": "#d62728",
    "under-replicated": "#ff7f0e",
    "producer blocked": "#d62728",
}


def incident_spans(ranges: Mapping[str, pd.DataFrame], step_s: float) -> pd.DataFrame:
    """One row (``what``, ``kind``, ``start``, ``end`` in Unix seconds) per stretch of trouble in range-query
    frames keyed as INCIDENT_QUERIES: consecutive troubled samples (no gap over 1.5 steps) make one stretch,
    which lasts until one step after its last sample. Oldest first."""
    rows = []
    for kind, frame in ranges.items():
        _, troubled, name = INCIDENT_QUERIES[kind]
        if frame.empty:
            continue
        labels = [c for c in frame.columns if c not in ("time", "value")]
        bad = frame[frame["value"].map(troubled)].sort_values("time")
        for key, series in bad.groupby(labels, sort=False) if labels else [((), bad)]:
            what = name.format(**dict(zip(labels, key if isinstance(key, tuple) else (key,), strict=True)))
            times = series["time"].tolist()
            start = previous = times[0]
            for t in [*times[1:], math.inf]:
                if t - previous > 1.5 * step_s:
                    rows.append({"what": what, "kind": kind, "start": start, "end": previous + step_s})
                    start = t
                previous = t
    return pd.DataFrame(rows, columns=["what", "kind", "start", "end"]).sort_values(
        ["start", "what"], ignore_index=True
    )
