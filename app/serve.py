"""``kobs app``: serve the Streamlit what-if page on a loopback address."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

PAGE = Path(__file__).with_name("whatif_page.py")


def streamlit_argv(port: int, address: str = "127.0.0.1") -> list[str]:
    """The command that serves the page headless, without usage statistics."""
    return [
        sys.executable, "-m", "streamlit", "run", str(PAGE),
        "--server.address", address, "--server.port", str(port),
        "--server.headless", "true", "--browser.gatherUsageStats", "false",
    ]  # fmt: skip


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``app`` on the ``kobs`` sub-command set."""
    sub = commands.add_parser(
        "app",
        help="serve the Streamlit app: capacity what-if (throughput, broker failure)",
        description="Serve the Streamlit what-if page until Ctrl-C. The live pages are not built yet.",
    )
    sub.add_argument("--address", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    sub.add_argument("--port", type=int, default=8501, help="port to listen on (default: %(default)s)")
    sub.set_defaults(run=lambda args: subprocess.run(streamlit_argv(args.port, args.address)).returncode)
