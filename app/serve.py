"""``kobs app``: serve the Streamlit app (live pages and what-if) on a loopback address."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import NoReturn

from app import CONFIG_ENV
from common.config import load_config

MAIN = Path(__file__).with_name("main.py")


def streamlit_argv(port: int, address: str = "127.0.0.1") -> list[str]:
    """The command that serves the app headless, without usage statistics, and without the developer
    options (Deploy, Rerun, Clear cache) in its toolbar: the people using it are viewers."""
    return [
        sys.executable, "-m", "streamlit", "run", str(MAIN),
        "--server.address", address, "--server.port", str(port),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
        "--client.toolbarMode", "viewer",
    ]  # fmt: skip


def app_env(config: Path | None) -> dict[str, str]:
    """Environment for the app's process: the configuration file, as an absolute path."""
    return {CONFIG_ENV: str(config.resolve())} if config else {}


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``app`` on the ``kobs`` sub-command set."""
    sub = commands.add_parser(
        "app",
        help="serve the Streamlit app: live cluster state and capacity what-ifs",
        description="Serve the Streamlit app until Ctrl-C: cluster health, consumer lag, throughput versus "
        "stored data and producers (from Prometheus at app.prometheus_url and the Parquet history under "
        "sinks.run_dir), and the capacity what-if page.",
    )
    sub.add_argument("--config", type=Path, help="YAML configuration file (default: the demo's settings)")
    sub.add_argument("--address", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    sub.add_argument("--port", type=int, default=8501, help="port to listen on (default: %(default)s)")
    sub.set_defaults(run=run)


def run(args: argparse.Namespace) -> NoReturn:
    """Check the configuration, then become the Streamlit server (exec): a SIGTERM or Ctrl-C reaches the
    server itself, which closes its port; no child is left listening."""
    load_config(args.config)  # a bad file is refused here, with its one-line error, not in every page
    argv = streamlit_argv(args.port, args.address)
    sys.stdout.flush()
    os.execve(argv[0], argv, {**os.environ, **app_env(args.config)})
