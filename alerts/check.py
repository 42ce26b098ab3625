"""Run promtool and amtool over the shipped rules and routing, for ``kobs alerts check|test`` and the tests.

Every rule file ``*.rules.yml`` here (and in ``compat/``, the opt-in recording rules) has a promtool unit
test file ``*.test.yml`` beside it. Routing is checked by resolving, for every alert the rules define, the
receiver Alertmanager picks: it must be the alert's severity (``page`` or ``ticket``); an alert without
severity goes to ``ticket``.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

ALERTS_DIR = Path(__file__).resolve().parent
COMPAT_DIR = ALERTS_DIR / "compat"  # opt-in recording rules serving older tools' names (docs/migrating.md)
ALERTMANAGER_CONFIG = ALERTS_DIR / "alertmanager.yml"


@dataclass(frozen=True)
class Result:
    name: str
    command: list[str]
    returncode: int
    output: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def rule_files() -> list[Path]:
    return sorted(ALERTS_DIR.glob("*.rules.yml"))


def compat_rule_files() -> list[Path]:
    return sorted(COMPAT_DIR.glob("*.rules.yml"))


def unit_test_files() -> list[Path]:
    return sorted(ALERTS_DIR.glob("*.test.yml")) + sorted(COMPAT_DIR.glob("*.test.yml"))


def alert_rules(paths: list[Path] | None = None) -> list[dict]:
    """Every alerting rule (the rule's mapping) in ``paths`` (default: the shipped rule files)."""
    return [
        rule
        for path in paths or rule_files()
        for group in yaml.safe_load(path.read_text())["groups"]
        for rule in group["rules"]
        if "alert" in rule
    ]


def _run(name: str, command: list[str], cwd: Path = ALERTS_DIR) -> Result:
    proc = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
    return Result(name, command, proc.returncode, (proc.stdout + proc.stderr).strip())


def check_rules() -> Result:
    files = [*rule_files(), *compat_rule_files()]
    return _run("promtool check rules", ["promtool", "check", "rules", *map(str, files)])


def run_unit_tests() -> Result:
    return _run("promtool test rules", ["promtool", "test", "rules", *map(str, unit_test_files())])


def check_config(config: Path = ALERTMANAGER_CONFIG) -> Result:
    return _run("amtool check-config", ["amtool", "check-config", str(config)])


def route_cases() -> list[tuple[dict[str, str], str]]:
    """(labels, expected receiver) for every shipped alert, plus an alert without severity."""
    cases = [
        ({"alertname": r["alert"], "cluster": "c1", **r["labels"]}, r["labels"]["severity"])
        for r in alert_rules()
    ]
    return [*cases, ({"alertname": "SomethingElse", "cluster": "c1"}, "ticket")]


def run_route_tests(config: Path = ALERTMANAGER_CONFIG) -> list[Result]:
    return [
        _run(
            f"amtool config routes test {labels['alertname']} -> {receiver}",
            [
                "amtool",
                "config",
                "routes",
                "test",
                f"--config.file={config}",
                f"--verify.receivers={receiver}",
                *(f"{k}={v}" for k, v in labels.items()),
            ],
        )
        for labels, receiver in route_cases()
    ]


def run_checks() -> list[Result]:
    """Syntax only: the rule files and the Alertmanager configuration load."""
    return [check_rules(), check_config()]


def run_all() -> list[Result]:
    """The checks, every rule's unit tests, and every alert's route."""
    return [*run_checks(), run_unit_tests(), *run_route_tests()]
