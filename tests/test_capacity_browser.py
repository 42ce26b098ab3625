"""The what-if page in a real browser: Chromium (Playwright) against ``kobs app``'s Streamlit server."""

from __future__ import annotations

from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from app.serve import streamlit_argv
from peers.process import ManagedProcess, free_port, http_ready

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "var" / "artifacts"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
]  # fmt: skip


@pytest.fixture(scope="module")
def page_url(tmp_path_factory):
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    run_dir = tmp_path_factory.mktemp("streamlit")
    ready = http_ready(url + "_stcore/health")
    server = ManagedProcess("streamlit", streamlit_argv(port), run_dir, ready, {"PYTHONPATH": str(ROOT)}, 60)
    with server:
        yield url


def test_browser_changes_inputs_and_sees_the_result(page_url):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            page.goto(page_url)
            # A fresh server's first paint is blank: wait for the model's answer to render.
            page.get_by_text("produce: producer NIC; consume: consumer NIC").wait_for(timeout=30_000)
            page.screenshot(path=ARTIFACTS / "whatif-throughput.png", full_page=True)

            partitions = page.get_by_label("Partitions")
            partitions.fill("16")
            partitions.press("Enter")
            page.get_by_role("tab", name="Broker failure").click()
            # 16 partitions, RF 1, 3 brokers; broker 0 dies holding 6 of them: 32 MiB / (6/16 MiB/s) = 85.3 s.
            page.get_by_text("send() blocks after 85.3 s").wait_for(timeout=30_000)
            page.screenshot(path=ARTIFACTS / "whatif-broker-failure.png", full_page=True)

            replication = page.get_by_label("Replication factor")
            replication.fill("4")
            replication.press("Enter")
            page.get_by_text("use at most 3").wait_for(timeout=30_000)
            page.screenshot(path=ARTIFACTS / "whatif-bad-input.png", full_page=True)
        finally:
            browser.close()
