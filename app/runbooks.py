"""The runbooks (``docs/runbooks/*.md``) as the app serves them: one section per alert, links made app links.

Alert rules link here by default (``/runbooks?alert=<name>``, see ``alerts.runbooks``), so a page opened
from Alertmanager, Grafana or a chat message lands on the alert's own section in the deployment's app.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

RUNBOOKS = Path(__file__).resolve().parents[1] / "docs" / "runbooks"
SECTION = re.compile(r"^## (\w+)\n", re.M)
LINK = re.compile(r"\[([^\]]+)\]\(([^)\s]+)\)")


@dataclass(frozen=True)
class Runbook:
    file: str  # e.g. "replication.md"
    intro: str  # the title and text before the first alert's section
    sections: dict[str, str]  # alert name -> its section's text


def load(directory: Path = RUNBOOKS) -> dict[str, Runbook]:
    """Every runbook file but the index, by file name."""
    books = {}
    for path in sorted(directory.glob("*.md")):
        if path.name != "README.md":
            intro, *parts = SECTION.split(path.read_text())
            books[path.name] = Runbook(path.name, intro, dict(zip(parts[::2], parts[1::2], strict=True)))
    return books


def find(books: dict[str, Runbook], alert: str) -> tuple[Runbook, str] | None:
    """The runbook and section of ``alert`` (names compare case-insensitively), or None."""
    for book in books.values():
        for name, text in book.sections.items():
            if name.lower() == alert.lower():
                return book, text
    return None


def app_links(text: str, books: dict[str, Runbook]) -> str:
    """Markdown whose links to other runbooks open their page in the app; links to files the app does not
    serve (other docs, the repository) keep only their text."""
    alerts = {name.lower(): name for book in books.values() for name in book.sections}

    def replace(match: re.Match) -> str:
        words, target = match.groups()
        if target.startswith(("http://", "https://")):
            return match[0]
        file, _, anchor = target.partition("#")
        if anchor.lower() in alerts and (file in books or not file):
            return f"[{words}](?alert={alerts[anchor.lower()]})"
        if file in books:
            return f"[{words}](?file={file})"
        return words

    return LINK.sub(replace, text)
