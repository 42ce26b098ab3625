"""Turn the dashboard specs into Grafana dashboard JSON with grafanalib, and write them to a directory.

Every dashboard gets a data-source variable (``$datasource``, any Prometheus) that each panel and target
uses, and one multi-value variable per label in its spec; uids are the specs' stable uids.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from grafanalib import core as g
from grafanalib._gen import DashboardEncoder

from dashboards.spec import DASHBOARDS, VARIABLE_SOURCES, DashboardSpec, Panel, sel

DATASOURCE = "${datasource}"
WIDTH = 24  # Grafana's grid width
STAT_SIZE = (6, 4)
GRAPH_SIZE = (12, 8)


def _variables(spec: DashboardSpec) -> list[g.Template]:
    datasource = g.Template(
        name="datasource", label="Data source", query="prometheus", type="datasource", default="Prometheus"
    )
    labels = [
        g.Template(
            name=name,
            label=name,
            query=f"label_values({sel(VARIABLE_SOURCES[name], *spec.variables[:i])}, {name})",
            dataSource=DATASOURCE,
            includeAll=True,
            multi=True,
            allValue=".*",
            default="$__all",
            refresh=2,  # on time-range change
        )
        for i, name in enumerate(spec.variables)
    ]
    return [datasource, *labels]


def _panel(panel: Panel, x: int, y: int) -> g.Panel:
    target = g.Target(expr=panel.expr, legendFormat=panel.legend, refId="A", datasource=DATASOURCE)
    width, height = STAT_SIZE if panel.stat else GRAPH_SIZE
    common = {
        "title": panel.title,
        "dataSource": DATASOURCE,
        "targets": [target],
        "gridPos": g.GridPos(height, width, x, y),
    }
    if panel.stat:
        mappings = [
            g.StatValueMappings(*(g.StatValueMappingItem(t, str(c)) for t, c in panel.mappings.items()))
        ]
        return g.Stat(
            **common, format=panel.unit, reduceCalc="lastNotNull", mappings=mappings if panel.mappings else []
        )
    return g.TimeSeries(**common, unit=panel.unit)


def _layout(spec: DashboardSpec) -> list[g.Panel]:
    """Row panels with their panels flowing left to right beneath them."""
    panels: list[g.Panel] = []
    y = 0
    for title, row in spec.rows:
        panels.append(g.RowPanel(title=title, gridPos=g.GridPos(1, WIDTH, 0, y)))
        y += 1
        x = row_height = 0
        for panel in row:
            width, height = STAT_SIZE if panel.stat else GRAPH_SIZE
            if x + width > WIDTH:
                x, y, row_height = 0, y + row_height, 0
            panels.append(_panel(panel, x, y))
            x, row_height = x + width, max(row_height, height)
        y += row_height
    return panels


def dashboard(spec: DashboardSpec) -> dict[str, Any]:
    """The Grafana JSON model of one dashboard."""
    board = g.Dashboard(
        title=spec.title,
        uid=spec.uid,
        tags=["kafka", "kobs"],
        timezone="browser",
        refresh="30s",
        panels=_layout(spec),
        templating=g.Templating(list=_variables(spec)),
    ).auto_panel_ids()
    return json.loads(json.dumps(board.to_json_data(), cls=DashboardEncoder))


def generate(out_dir: Path) -> list[Path]:
    """Write ``<uid>.json`` for every dashboard into ``out_dir``; returns the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for spec in DASHBOARDS:
        path = out_dir / f"{spec.uid}.json"
        path.write_text(json.dumps(dashboard(spec), indent=2, sort_keys=True) + "\n")
        paths.append(path)
    return paths
