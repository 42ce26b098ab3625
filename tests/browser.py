"""Headless Chromium (Debian's, driven by Playwright) for the tests that look at the app as a person does."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from playwright.sync_api import Page, sync_playwright

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run", "--disable-sync",
]  # fmt: skip
# Streamlit shows a skeleton while a table's or chart's code loads; none left means everything drew.
RENDERED = "() => !document.querySelector('[data-testid=\"stSkeleton\"]')"


@contextmanager
def browser_page(width: int = 1400, height: int = 1800) -> Iterator[Page]:
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height})
        finally:
            browser.close()


def open_page(page: Page, title: str) -> None:
    """Follow the app's sidebar link, as a person would."""
    page.get_by_test_id("stSidebarNav").get_by_text(title, exact=True).click()
