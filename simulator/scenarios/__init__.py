"""The built-in scenarios: the YAML files beside this module (their format: docs/simulator.md). Apart from
:mod:`simulator.scenario` so that listing them (``kobs simulate --help``) loads no simulator."""

from __future__ import annotations

from pathlib import Path

BUILTIN_DIR = Path(__file__).parent


def builtin_names() -> list[str]:
    return sorted(p.stem for p in BUILTIN_DIR.glob("*.yaml"))
