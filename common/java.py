"""Strings as Java's own parsers read them."""

from __future__ import annotations


def quoted(value: str) -> str:
    """``value`` double-quoted with backslashes and quotes escaped: one argument of a ``java @file``, or one
    option value of a JAAS configuration (both read quoted strings this way)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
