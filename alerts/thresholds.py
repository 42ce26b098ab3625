"""Where the alert rules draw their lines, so the dashboards colour values by the same numbers (one source).

A rule's condition compares an aggregate of one metric with a number, as in
``max by (cluster, topic) (kobs_topic_under_replicated_seconds) > 15``. The first such comparison of each
metric in a rule is that rule's line for the metric; a later one on the same metric is a hysteresis arm,
which only keeps a firing alert firing. Comparisons of arithmetic (``time() - max(...) > 300``) are not
lines on the metric, the number does not apply to the metric itself, but they are on a panel that computes
exactly that arithmetic (:func:`quantity_lines`); nor are those of an ``unless`` arm, which vetoes
(``... unless on (cluster, broker) max by (cluster, broker) (kobs_broker_maintenance) == 1``: no alert while
the broker is in a planned restart) and fires nothing.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass

OPERATORS = {">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le, "==": operator.eq}
OPERATORS["!="] = operator.ne

UNLESS = re.compile(r"\bunless\b")
ARM_END = re.compile(r"[()]|\bor\b")  # an ``unless`` arm ends where its group closes or an ``or`` begins

COMPARISON = re.compile(
    r"(?:^|\(|\b(?:or|and|unless)(?:\s+on\s*\([^)]*\))?)\s*"  # the start of an arm: nothing computed before
    r"(?:max|min|sum)\s+by\s*\([^)]*\)\s*\((?P<metric>[a-zA-Z_:][\w:]*)(?:\{[^}]*\})?\)"
    r"\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>-?\d+(?:\.\d+)?)"
)

GREEN, ORANGE, RED = "green", "orange", "red"


@dataclass(frozen=True)
class Line:
    alert: str
    severity: str
    metric: str
    op: str
    value: float

    def crossed(self, x: float) -> bool:
        return OPERATORS[self.op](x, self.value)


def without_vetoes(expr: str) -> str:
    """``expr`` without its ``unless`` arms (``unless`` binds tighter than ``or``)."""
    while found := UNLESS.search(expr):
        depth, end = 0, len(expr)
        for token in ARM_END.finditer(expr, found.end()):
            if token[0] == "(":
                depth += 1
            elif depth == 0:
                end = token.start()
                break
            elif token[0] == ")":
                depth -= 1
        expr = expr[: found.start()] + expr[end:]
    return expr


def lines(rules: Iterable[dict]) -> list[Line]:
    """Every alerting rule's line per metric it compares (rules as Prometheus rule-file mappings)."""
    found = []
    for rule in rules:
        seen = set()
        for match in COMPARISON.finditer(without_vetoes(rule["expr"].strip())):
            if match["metric"] not in seen:
                seen.add(match["metric"])
                severity = rule.get("labels", {}).get("severity", "ticket")
                found.append(
                    Line(rule["alert"], severity, match["metric"], match["op"], float(match["value"]))
                )
    return found


_MATCHERS = re.compile(r"\{[^}]*\}")
_NUMBER = r"\s*(?P<op>>=|<=|==|!=|>|<)\s*(?P<value>-?\d+(?:\.\d+)?)(?![\w.])"


def _normal(expr: str) -> str:
    """``expr`` without label matchers, with single spaces and none inside brackets."""
    text = " ".join(_MATCHERS.sub("", expr).split())
    return re.sub(r"([(\[]) | ([)\]])", r"\1\2", text)


def quantity_lines(expr: str, rules: Iterable[dict]) -> list[Line]:
    """The lines of the rules that compare exactly what ``expr`` computes (label matchers aside) with a
    number, as ``time() - max by (query) (kobs_pipeline_last_batch_timestamp_seconds) > 300`` for a panel
    of ``time() - max by (query) (...)``: a panel of that quantity shows where the rule fires, whatever its
    arithmetic. Vetoes (``unless`` arms) draw nothing."""
    quantity = re.escape(_normal(expr))
    found = []
    for rule in rules:
        arms = _normal(without_vetoes(rule["expr"].strip()))
        for match in re.finditer(rf"(?:^|\(|\bor |\band ){quantity}{_NUMBER}", arms):
            severity = rule.get("labels", {}).get("severity", "ticket")
            found.append(Line(rule["alert"], severity, expr, match["op"], float(match["value"])))
            break
    return found


def shipped_line(alert: str, metric: str) -> Line:
    """The shipped rule ``alert``'s line on ``metric``, for code that judges values as the rule does."""
    from alerts.check import alert_rules  # reads the rule files

    (line,) = [line for line in lines(alert_rules()) if (line.alert, line.metric) == (alert, metric)]
    return line


def colour(lines_: Iterable[Line], x: float) -> str:
    """The colour of value ``x``: red if it crosses a page's line, orange a ticket's, else green."""
    crossed = {line.severity for line in lines_ if line.crossed(x)}
    return RED if "page" in crossed else ORANGE if crossed else GREEN


def steps(lines_: list[Line]) -> list[tuple[float | None, str]]:
    """Grafana threshold steps, ascending: ``(None, colour below everything), (value, colour from it on)``.

    Grafana colours a value by the last step it reaches (value >= step), so a strict line ``> 15`` starts its
    colour at the next float above 15, and ``== 0`` colours exactly 0.
    """
    starts = set()
    for line in lines_:
        above = math.nextafter(line.value, math.inf)
        starts |= (
            {above}
            if line.op in (">", "<=")
            else {line.value}
            if line.op in (">=", "<")
            else {line.value, above}
        )
    result: list[tuple[float | None, str]] = [(None, colour(lines_, -math.inf))]
    for start in sorted(starts):
        if (c := colour(lines_, start)) != result[-1][1]:
            result.append((start, c))
    return result
