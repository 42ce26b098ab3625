"""Waiting on many futures under one deadline (standard library only: the groups' child process imports
it, and stays small)."""

from __future__ import annotations

import time
from collections.abc import Hashable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

K = TypeVar("K", bound=Hashable)


def wait_all(futures: Mapping[K, Future], deadline: float, what: str, errors: list[str]) -> dict[K, Any]:
    """Results of the futures that finish by ``deadline`` (monotonic); one error line per failure kind."""
    results: dict[K, Any] = {}
    failures: dict[str, int] = {}
    for key, future in futures.items():
        try:
            results[key] = future.result(timeout=max(0.0, deadline - time.monotonic()))
        except Exception as exc:  # KafkaException, TimeoutError: both are faults of the watched cluster
            forget_frames(exc)
            reason = f"{type(exc).__name__}: {exc}"
            failures[reason] = failures.get(reason, 0) + 1
    errors.extend(f"{what}: {n} failed with {reason}" for reason, n in failures.items())
    return results


def forget_frames(exc: BaseException) -> None:
    """Drop the traceback of ``exc``, a future's exception just read. The future keeps the exception, and
    the traceback raising it gave holds the reader's frame and its callers' (their futures, their source):
    a reference cycle that keeps a dropped source's clients alive until Python's cyclic collector runs, at
    any moment and on any thread (librdkafka aborts when a client is destroyed on its own thread)."""
    exc.__traceback__ = None
