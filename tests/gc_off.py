"""Checking that dropping an object frees it at once, not only when Python's cyclic collector runs."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def cyclic_collector_off() -> Iterator[None]:
    """Only reference counts free objects meanwhile: what a reference cycle holds stays."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
