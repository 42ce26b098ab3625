"""The metrics-topic event contract: one place to encode, decode and validate records.

A record carries one *batch*: everything one source saw in one scrape of one cluster (many samples, and
events such as ISR changes). Carrying many samples per record means Kafka and the streaming source pay
their per-record costs once per scrape, not once per sample. The key ``cluster|source`` keeps one
source of one cluster in one partition, so its batches stay ordered.

Wire format (UTF-8 JSON, documented with examples in ``docs/contract.md``)::

    {"v": 1, "cluster": "prod", "source": "jmx/broker-1", "ts": 1732270000000,
     "samples": [["kafka_broker_under_replicated_partitions", {"broker": "1"}, 0.0]],
     "events": [{"type": "isr_change", "ts": 1732270000000, "topic": "t", "partition": 0, ...}]}

Schema changes are additive: unknown top-level fields and unknown event types are kept and ignored by
readers that do not know them; a record of a newer major version is rejected with a reason. A record that
fails validation never raises out of :func:`decode_or_dead_letter`: it becomes a :class:`DeadLetter`.
"""

from __future__ import annotations

import base64
import functools
import itertools
import json
import math
import operator
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson

SCHEMA_VERSION = 1
MAX_ITEMS_PER_RECORD = 5000  # keeps a record well under Kafka's default 1 MB message.max.bytes
# The latest time a record or event may carry: 9999-12-31T23:59:59.999Z. Readers keep times in
# microseconds as 64-bit integers (Spark's timestamps), which holds up to the year 294,247; a later time is
# a broken clock or a bad producer, refused here so it cannot fail the pipeline downstream.
MAX_TS_MS = 253_402_300_799_999

_METRIC_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*\Z")
NON_FINITE = {"NaN": math.nan, "+Inf": math.inf, "-Inf": -math.inf}  # sample values strict JSON lacks

ISR_CHANGE_KINDS = frozenset({"shrink", "expand", "replace", "leader_change"})

# Required fields (name -> accepted Python types) for the event types this version defines.
EVENT_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "isr_change": {
        "topic": (str,),
        "partition": (int,),
        "old_isr": (list,),
        "new_isr": (list,),
        "leader": (int,),
        "leader_epoch": (int,),
        "change": (str,),
    },
    "controller_change": {"controller_id": (int,), "controller_epoch": (int,)},
}


class ContractError(ValueError):
    """A record does not follow the contract; the message is the reason kept with the dead letter."""


class Sample(NamedTuple):  # a tuple: collectors make hundreds of thousands per scrape, twice as fast
    """One numeric observation: a canonical metric name (see ``common/names.py``), labels, value."""

    name: str
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True)
class Event:
    """Something that happened at ``ts_ms`` (an ISR change, a controller change); fields per type."""

    type: str
    ts_ms: int
    fields: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Batch:
    """What one source saw of one cluster at one scrape time (epoch milliseconds)."""

    cluster: str
    source: str
    ts_ms: int
    samples: tuple[Sample, ...] = ()
    events: tuple[Event, ...] = ()

    @property
    def key(self) -> bytes:
        """Kafka record key: one cluster/source always lands in one partition."""
        return f"{self.cluster}|{self.source}".encode()

    def chunks(self, max_items: int = MAX_ITEMS_PER_RECORD) -> Iterator[Batch]:
        """Split into batches of at most ``max_items`` samples and events each (same key, same time)."""
        if len(self.samples) <= max_items and len(self.events) <= max_items:
            yield self
            return
        for start in range(0, max(len(self.samples), len(self.events)), max_items):
            yield Batch(
                self.cluster,
                self.source,
                self.ts_ms,
                self.samples[start : start + max_items],
                self.events[start : start + max_items],
            )


@dataclass(frozen=True)
class DeadLetter:
    """A record that failed validation, kept with its reason and where it came from."""

    reason: str
    value: bytes | None
    key: bytes | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    def to_json(self) -> bytes:
        def b64(raw: bytes | None) -> str | None:
            return None if raw is None else base64.b64encode(raw).decode()

        doc = {
            "reason": self.reason,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "key_b64": b64(self.key),
            "value_b64": b64(self.value),
        }
        return json.dumps(doc, separators=(",", ":")).encode()


def encode(batch: Batch) -> bytes:
    """Serialise a batch (validated first, so a producer can never write what a reader rejects)."""
    rows, plain = _sample_rows(batch.samples)
    doc = {
        "v": SCHEMA_VERSION,
        "cluster": batch.cluster,
        "source": batch.source,
        "ts": batch.ts_ms,
        "samples": rows,
        "events": [{"type": e.type, "ts": e.ts_ms, **e.fields} for e in batch.events],
    }
    _validate(doc | {"samples": []} if plain else doc)  # not plainly valid: find and name the bad sample
    return orjson.dumps(doc)  # compact JSON, UTF-8; several times faster than json.dumps on big batches


_NAME, _LABELS, _VALUE = (operator.attrgetter(f) for f in ("name", "labels", "value"))


def _sample_rows(samples: tuple[Sample, ...]) -> tuple[list[Any], bool]:
    """The ``[name, labels, value]`` rows, and whether they are plainly valid.

    The hot path of a collector: the checks of :func:`_validate_sample` run column by column
    (:func:`_plain_names`), several times faster than sample by sample.
    """
    names = list(map(_NAME, samples))
    labels = [x if type(x) is dict else dict(x) for x in map(_LABELS, samples)]
    values = list(map(_VALUE, samples))
    plain = _plain_names(names, labels) and set(map(type, values)) <= {int, float}
    if plain and math.isfinite(sum(values)):  # a NaN or an infinity makes the sum non-finite
        return list(zip(names, labels, map(float, values), strict=True)), True  # tuples: JSON arrays
    return [[n, x, _encode_value(v)] for n, x, v in zip(names, labels, values, strict=True)], plain


def parse(value: bytes | None) -> dict[str, Any]:
    """Parse and validate one record value into its JSON document (the wire format above); raises
    :class:`ContractError` naming what is wrong. Sample values may be the strings of ``NON_FINITE``."""
    if value is None:
        raise ContractError("empty record (tombstone): no value")
    try:
        doc = orjson.loads(value)  # strict JSON (no bare NaN or Infinity); ~30% less time than json.loads
    except orjson.JSONDecodeError as exc:  # invalid UTF-8 and nesting past 1024 levels included
        raise ContractError(f"not UTF-8 JSON: {exc}") from None
    _validate(doc)
    return doc


def decode(value: bytes | None) -> Batch:
    """Parse and validate one record value; raises :class:`ContractError` naming what is wrong."""
    doc = parse(value)
    return Batch(
        cluster=doc["cluster"],
        source=doc["source"],
        ts_ms=doc["ts"],
        samples=tuple(Sample(n, labels, _decode_value(v)) for n, labels, v in doc.get("samples", ())),
        events=tuple(
            Event(e["type"], e["ts"], {k: v for k, v in e.items() if k not in ("type", "ts")})
            for e in doc.get("events", ())
        ),
    )


def decode_or_dead_letter(
    value: bytes | None,
    key: bytes | None = None,
    topic: str | None = None,
    partition: int | None = None,
    offset: int | None = None,
) -> Batch | DeadLetter:
    """Like :func:`decode`, but a bad record becomes a :class:`DeadLetter` instead of an exception."""
    try:
        return decode(value)
    except ContractError as exc:
        return DeadLetter(str(exc), value, key, topic, partition, offset)


def _encode_value(value: float) -> float | str:
    if math.isfinite(value):
        return float(value)
    if math.isnan(value):
        return "NaN"
    return "+Inf" if value > 0 else "-Inf"


def _decode_value(value: float | str) -> float:
    return NON_FINITE[value] if isinstance(value, str) else float(value)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _validate(doc: Any) -> None:
    if not isinstance(doc, dict):
        raise ContractError(f"record is a JSON {type(doc).__name__}, expected an object")
    version = doc.get("v")
    if not _is_int(version):
        raise ContractError("v: missing or not an integer schema version")
    if version > SCHEMA_VERSION or version < 1:
        raise ContractError(f"v: unsupported schema version {version} (this build reads 1..{SCHEMA_VERSION})")
    for name in ("cluster", "source"):
        if not isinstance(doc.get(name), str) or not doc[name]:
            raise ContractError(f"{name}: missing or not a non-empty string")
    if not _is_int(doc.get("ts")) or not 0 <= doc["ts"] <= MAX_TS_MS:
        raise ContractError(f"ts: missing or not epoch milliseconds between 0 and {MAX_TS_MS} (year 9999)")
    samples = doc.get("samples", [])
    if not isinstance(samples, list):
        raise ContractError("samples: not a list")
    if not _plain_samples(samples):
        for i, sample in enumerate(samples):
            _validate_sample(i, sample)  # raises, naming the first sample that is wrong
    events = doc.get("events", [])
    if not isinstance(events, list):
        raise ContractError("events: not a list")
    for i, event in enumerate(events):
        _validate_event(i, event)


def _plain_names(names: Sequence[Any], labels: Sequence[dict]) -> bool:
    """Whether every metric name and label name is valid and every label value a string: the checks of
    :func:`_validate_sample` column by column in C loops (types as sets, each distinct name once)."""
    keys = set(itertools.chain.from_iterable(labels))
    return (
        set(map(type, names)) <= {str}
        and all(map(_valid_metric_name, set(names)))
        and set(map(type, keys)) <= {str}
        and all(map(_valid_label_name, keys))
        and set(map(type, itertools.chain.from_iterable(map(dict.values, labels)))) <= {str}
    )


def _plain_samples(samples: list) -> bool:
    """Whether every sample of a parsed record is plainly valid (each ``[name, labels, value]`` passes
    :func:`_validate_sample`), checked column by column; False: check them one by one to name the bad one."""
    if not samples:
        return True
    if set(map(type, samples)) != {list} or set(map(len, samples)) != {3}:
        return False
    names, labels, values = zip(*samples, strict=True)
    kinds = set(map(type, values))
    return (
        set(map(type, labels)) == {dict}
        and _plain_names(names, labels)
        and kinds <= {int, float, str}
        and (str not in kinds or {v for v in values if type(v) is str} <= set(NON_FINITE))
    )


@functools.lru_cache(maxsize=4096)
def _valid_metric_name(name: str) -> bool:
    return bool(_METRIC_NAME.match(name))


@functools.lru_cache(maxsize=4096)
def _valid_label_name(label: str) -> bool:
    return bool(_LABEL_NAME.match(label)) and not label.startswith("__")


def _validate_sample(i: int, sample: Any) -> None:
    # The hot path of encode and decode: names are checked once (cached), messages built only on failure.
    if not isinstance(sample, list) or len(sample) != 3:
        raise ContractError(f"samples[{i}]: expected [name, labels, value]")
    name, labels, value = sample
    if not isinstance(name, str) or not _valid_metric_name(name):
        raise ContractError(f"samples[{i}]: metric name {name!r} is not a valid Prometheus name")
    if not isinstance(labels, dict):
        raise ContractError(f"samples[{i}]: labels are not an object")
    for label, label_value in labels.items():
        if not isinstance(label, str) or not _valid_label_name(label):
            raise ContractError(f"samples[{i}]: label name {label!r} is not a valid Prometheus label name")
        if not isinstance(label_value, str):
            raise ContractError(f"samples[{i}]: label {label!r} value is not a string")
    kind = type(value)  # exact types: a list or object value fails here instead of hashing into NON_FINITE
    if kind is not float and kind is not int and not (kind is str and value in NON_FINITE):
        raise ContractError(f"samples[{i}]: value {value!r} is not a number (or NaN, +Inf, -Inf)")


def _validate_event(i: int, event: Any) -> None:
    where = f"events[{i}]"
    if not isinstance(event, dict):
        raise ContractError(f"{where}: not an object")
    if not isinstance(event.get("type"), str) or not event["type"]:
        raise ContractError(f"{where}: type missing or not a string")
    if not _is_int(event.get("ts")) or not 0 <= event["ts"] <= MAX_TS_MS:
        raise ContractError(f"{where}: ts missing or not epoch milliseconds between 0 and {MAX_TS_MS}")
    for name, types in EVENT_FIELDS.get(event["type"], {}).items():
        value = event.get(name)
        if not isinstance(value, types) or (types == (int,) and not _is_int(value)):
            expected = " or ".join(t.__name__ for t in types)
            raise ContractError(f"{where}: {event['type']} field {name!r} missing or not {expected}")
    if event["type"] == "isr_change":
        if event["change"] not in ISR_CHANGE_KINDS:
            raise ContractError(f"{where}: change {event['change']!r} not one of {sorted(ISR_CHANGE_KINDS)}")
        for name in ("old_isr", "new_isr"):
            if not all(_is_int(b) for b in event[name]):
                raise ContractError(f"{where}: {name} must list integer broker ids")
