"""Alert rules and routing: promtool and amtool green, and rules, tests, docs and runbooks in agreement."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from alerts import check
from common.metrics import ALL_METRICS, DERIVED_METRICS, metric_of
from kobs.cli import main

DOCS = Path(__file__).resolve().parent.parent / "docs"
METRIC_NAME = re.compile(r"\b((?:kobs|kafka)_[a-z0-9_]+)\b")


def _assert_ok(result: check.Result) -> None:
    assert result.ok, f"{' '.join(result.command)} failed:\n{result.output}"


@pytest.mark.parametrize(
    "run", [check.check_rules, check.run_unit_tests, check.check_config], ids=lambda f: f.__name__
)
def test_promtool_and_amtool_pass(run):
    _assert_ok(run())


@pytest.mark.parametrize("result", check.run_route_tests(), ids=lambda r: r.name.split(" ", 4)[-1])
def test_every_alert_routes_to_its_severity(result):
    _assert_ok(result)


def test_a_wrong_route_expectation_fails():
    """The route check can fail: a page alert resolved against the ticket receiver is reported."""
    result = check._run(
        "wrong",
        [
            "amtool",
            "config",
            "routes",
            "test",
            f"--config.file={check.ALERTMANAGER_CONFIG}",
            "--verify.receivers=ticket",
            "severity=page",
            "alertname=X",
        ],
    )
    assert not result.ok


def _unit_test_evals() -> dict[str, list[bool]]:
    """alertname -> for each promtool eval of it, whether alerts were expected."""
    evals: dict[str, list[bool]] = {}
    for path in check.unit_test_files():
        for case in yaml.safe_load(path.read_text())["tests"]:
            for ev in case.get("alert_rule_test", []):
                evals.setdefault(ev["alertname"], []).append(bool(ev.get("exp_alerts")))
    return evals


def test_every_alert_has_firing_and_not_firing_unit_tests():
    evals = _unit_test_evals()
    for rule in check.alert_rules():
        name = rule["alert"]
        assert True in evals.get(name, []), f"{name}: no promtool case where it fires"
        assert False in evals.get(name, []), f"{name}: no promtool case where it must not fire"


def _seconds(duration: str) -> int:
    """A promtool duration such as ``90s``, ``25m`` or ``1h`` in seconds."""
    return sum(
        int(n) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[u]
        for n, u in re.findall(r"(\d+)([smhd])", duration)
    )


def test_every_alert_has_a_promtool_case_where_it_fires_and_then_clears():
    """No alert that pages or tickets forever: in one case with the same input, it fires, and at a later
    evaluation, after its cause ended, nothing fires."""
    recovered = set()
    for path in check.unit_test_files():
        for case in yaml.safe_load(path.read_text())["tests"]:
            evals = sorted(
                (_seconds(e["eval_time"]), e["alertname"], bool(e.get("exp_alerts")))
                for e in case.get("alert_rule_test", [])
            )
            for when, name, fired in evals:
                if fired and any(n == name and not f and w > when for w, n, f in evals):
                    recovered.add(name)
    assert {r["alert"] for r in check.alert_rules()} <= recovered, "alerts never seen clearing in promtool"


def test_docs_say_when_every_alert_fires_and_clears_with_the_rules_hold_time():
    text = (DOCS / "metrics.md").read_text().split("## When each alert fires and clears")[1]
    rows = {m[0]: m[1] for m in re.findall(r"^\| (\w+) \| [^|]+ \| (\w+) \| [^|]+ \|$", text, re.M)}
    for rule in check.alert_rules():
        assert rows.get(rule["alert"]) == rule.get("for", "0s"), f"{rule['alert']}: hold time in docs"


def test_every_alert_has_severity_and_annotations():
    for rule in check.alert_rules():
        assert rule["labels"]["severity"] in {"page", "ticket"}, rule["alert"]
        assert {"summary", "description", "runbook_url"} <= set(rule["annotations"]), rule["alert"]


def test_rules_read_only_documented_metrics():
    for rule in check.alert_rules():
        unknown = {metric_of(name) for name in METRIC_NAME.findall(rule["expr"])} - set(ALL_METRICS)
        assert not unknown, f"{rule['alert']} reads undocumented metrics {unknown}"


def test_docs_metrics_lists_every_metric_with_its_labels():
    text = (DOCS / "metrics.md").read_text()
    rows = {
        m.group(1): (m.group(2), m.group(3))
        for m in re.finditer(r"^\| `(\w+)` \| (\w+) \| ([\w, —]+) \|", text, re.M)
    }
    assert set(rows) == set(ALL_METRICS)
    for name, metric in ALL_METRICS.items():
        assert rows[name] == (metric.type, ", ".join(metric.labels) or "—"), name


def test_derived_metric_names_follow_conventions():
    for metric in DERIVED_METRICS:
        assert metric.name.startswith("kobs_")
        assert metric.name.endswith("_total") == (metric.type == "counter"), metric.name
        assert not {"job", "instance"} & set(metric.labels), metric.name


def test_kobs_alerts_test_runs_every_check_and_reports_success(capsys):
    assert main(["alerts", "test", "--quiet"]) == 0
    summary = capsys.readouterr().out.strip().splitlines()[-1]
    assert summary == f"kobs alerts test: {len(check.route_cases()) + 3} passed, 0 failed"


def test_kobs_alerts_check_validates_rules_and_routing_syntax(capsys):
    assert main(["alerts", "check"]) == 0
    out = capsys.readouterr().out
    assert "ok   promtool check rules" in out and "ok   amtool check-config" in out
    assert out.strip().splitlines()[-1] == "kobs alerts check: 2 passed, 0 failed"


def test_kobs_alerts_check_fails_on_a_broken_rule_file(tmp_path, monkeypatch, capsys):
    """A rule with a PromQL syntax error makes promtool, and so the command, fail."""
    broken = tmp_path / "broken.rules.yml"
    broken.write_text("groups: [{name: g, rules: [{alert: A, expr: 'sum by (cluster) (x'}]}]\n")
    monkeypatch.setattr(check, "ALERTS_DIR", tmp_path)
    assert main(["alerts", "check", "--quiet"]) == 1
    out = capsys.readouterr().out
    assert "FAIL promtool check rules" in out and out.strip().endswith("1 passed, 1 failed")


def test_the_legacy_name_rules_read_only_documented_metrics():
    for path in check.compat_rule_files():
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                read = set(re.findall(r"\b(kobs_\w+)", rule["expr"]))
                assert read and read <= set(ALL_METRICS), (rule["record"], read)


def test_the_migration_guide_names_every_recorded_legacy_name():
    guide = (DOCS / "migrating.md").read_text()
    for path in check.compat_rule_files():
        for group in yaml.safe_load(path.read_text())["groups"]:
            for rule in group["rules"]:
                row = next((line for line in guide.splitlines() if f"`{rule['record']}`" in line), "")
                assert "recorded" in row, f"{rule['record']}: docs/migrating.md does not say it is recorded"
