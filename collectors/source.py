"""What every source returns from one scrape: the batch it saw and the reasons anything went wrong.

A source never raises for a fault of the thing it watches (a broker down, a malformed page, a timeout): it
returns what it could read plus one error string per problem, which the scheduler counts and logs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from common.contract import Batch


@dataclass(frozen=True)
class Scrape:
    batch: Batch
    errors: list[str] = field(default_factory=list)


def now_ms() -> int:
    return time.time_ns() // 1_000_000
