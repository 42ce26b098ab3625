"""Turn the dashboard specs into Grafana dashboard JSON with grafanalib, and write them to a directory.

Every dashboard gets a data-source variable (``$datasource``, any Prometheus) that each panel and target
uses, and one multi-value variable per label in its spec; uids are the specs' stable uids. A panel's
thresholds are the lines its alert rules draw (``alerts.thresholds``); its description and links name
those rules with their runbooks.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from grafanalib import core as g
from grafanalib._gen import DashboardEncoder

from alerts import check, runbooks, thresholds
from common.metrics import ALL_METRICS
from dashboards.spec import DASHBOARDS, DashboardSpec, Panel, Variable, sel

DATASOURCE = "${datasource}"
WIDTH = 24  # Grafana's grid width
SIZES = {"stat": (6, 4), "timeline": (12, 8), "timeseries": (12, 8)}  # (width, height)


def _variables(spec: DashboardSpec) -> list[g.Template]:
    datasource = g.Template(
        name="datasource", label="Data source", query="prometheus", type="datasource", default="Prometheus"
    )
    return [datasource, *(_variable(v, spec.variables[:i]) for i, v in enumerate(spec.variables))]


def _variable(variable: Variable, earlier: tuple[Variable, ...]) -> g.Template:
    """A multi-value variable whose values are filtered by the variables before it that its metric carries."""
    filters = [v.name for v in earlier if v.name in ALL_METRICS[variable.metric].labels]
    return g.Template(
        name=variable.name,
        label=variable.name,
        query=f"label_values({sel(variable.metric, *filters)}, {variable.name})",
        dataSource=DATASOURCE,
        includeAll=True,
        multi=True,
        allValue=".*",
        default="$__all",
        refresh=2,  # on time-range change
    )


class Rules:
    """The shipped alert rules as panels use them: their lines and their runbook links."""

    def __init__(self, runbook_url: str):
        self.by_name = {rule["alert"]: rule for rule in check.alert_rules()}
        self.lines = thresholds.lines(self.by_name.values())
        self.runbook_url = runbook_url

    def lines_of(self, panel: Panel) -> list[thresholds.Line]:
        """The lines of the panel's alerts on metrics its query reads, or on the very quantity it shows."""
        alerts = [self.by_name[a] for a in panel.alerts]
        return [
            line
            for line in self.lines
            if line.alert in panel.alerts and re.search(rf"\b{line.metric}\b", panel.expr)
        ] or thresholds.quantity_lines(panel.expr, alerts)

    def link(self, alert: str) -> str:
        return runbooks.url(self.runbook_url, alert, self.by_name[alert]["annotations"]["runbook_url"])

    def severity(self, alert: str) -> str:
        return self.by_name[alert]["labels"]["severity"]


def _steps(panel: Panel, lines: list[thresholds.Line]) -> list[tuple[float | None, str]]:
    """Threshold steps: the alert lines', else the panel's own value colours, else none."""
    if lines:
        return thresholds.steps(lines)
    coloured = sorted(
        (code, panel.colours[text]) for text, code in panel.mappings.items() if text in panel.colours
    )
    steps: list[tuple[float | None, str]] = []
    for code, colour in coloured:
        if not steps or steps[-1][1] != colour:
            steps.append((None if not steps else code, colour))
    return steps


def _mappings(panel: Panel, steps: list[tuple[float | None, str]]) -> list[dict]:
    """One Grafana value mapping: each code shows its text, in the colour its step gives it."""
    if not panel.mappings:
        return []

    def colour(code: int) -> str:
        return [c for start, c in steps if start is None or code >= start][-1]

    options = {
        str(code): {"text": text, "index": i, **({"color": colour(code)} if steps else {})}
        for i, (text, code) in enumerate(panel.mappings.items())
    }
    return [{"type": "value", "options": options}]


def _description(panel: Panel, rules: Rules) -> str:
    alerts = [f"[{a}]({rules.link(a)}) ({rules.severity(a)})" for a in panel.alerts]
    return panel.description + (f"\n\nAlerts: {', '.join(alerts)}" if alerts else "")


def _panel(panel: Panel, x: int, y: int, rules: Rules) -> g.Panel:
    target = g.Target(expr=panel.expr, legendFormat=panel.legend, refId="A", datasource=DATASOURCE)
    width, height = SIZES[panel.kind]
    steps = _steps(panel, rules.lines_of(panel))
    common = {
        "title": panel.title,
        "description": _description(panel, rules),
        "dataSource": DATASOURCE,
        "targets": [target],
        "gridPos": g.GridPos(height, width, x, y),
        "links": [
            {"title": f"Runbook: {a}", "url": rules.link(a), "targetBlank": True} for a in panel.alerts
        ],
        "thresholds": [{"value": start, "color": colour} for start, colour in steps],
        "mappings": _mappings(panel, steps),
    }
    if panel.kind == "stat":
        return g.Stat(**common, format=panel.unit, reduceCalc="lastNotNull", colorMode="background")
    if panel.kind == "timeline":
        return g.StateTimeline(**common, mergeValues=True, showValue="never")
    lines = "dashed" if steps else "off"  # where the alert fires, drawn on the graph
    return g.TimeSeries(**common, unit=panel.unit, thresholdsStyleMode=lines)


def _layout(spec: DashboardSpec, rules: Rules) -> list[g.Panel]:
    """Row panels with their panels flowing left to right beneath them."""
    panels: list[g.Panel] = []
    y = 0
    for title, row in spec.rows:
        panels.append(g.RowPanel(title=title, gridPos=g.GridPos(1, WIDTH, 0, y)))
        y += 1
        x = row_height = 0
        for panel in row:
            width, height = SIZES[panel.kind]
            if x + width > WIDTH:
                x, y, row_height = 0, y + row_height, 0
            panels.append(_panel(panel, x, y, rules))
            x, row_height = x + width, max(row_height, height)
        y += row_height
    return panels


def dashboard(spec: DashboardSpec, rules: Rules) -> dict[str, Any]:
    """The Grafana JSON model of one dashboard."""
    board = g.Dashboard(
        title=spec.title,
        uid=spec.uid,
        tags=["kafka", "kobs"],
        timezone="browser",
        refresh="30s",
        panels=_layout(spec, rules),
        templating=g.Templating(list=_variables(spec)),
        # the other boards, in a menu at the top, opened on the same time range and variables
        links=[
            g.DashboardLink(
                asDropdown=True, tags=["kobs"], title="Kafka Observatory", includeVars=True, keepTime=True
            )
        ],
    ).auto_panel_ids()
    return json.loads(json.dumps(board.to_json_data(), cls=DashboardEncoder))


def generate(out_dir: Path, runbook_url: str = runbooks.DEFAULT_TEMPLATE) -> list[Path]:
    """Write ``<uid>.json`` for every dashboard into ``out_dir``, runbook links made by the ``runbook_url``
    template (``alerts.runbooks``); returns the paths written."""
    rules = Rules(runbooks.check_template(runbook_url))
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in DASHBOARDS:
        path = out_dir / f"{spec.uid}.json"
        path.write_text(json.dumps(dashboard(spec, rules), indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths
