"""``kobs whatif``: capacity questions answered by the model, as a readable table or ``--json``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, fields, replace
from typing import Any

from app.capacity import calibration
from app.capacity.failure import DEFAULT_BUFFER_MEMORY, Producer, lose_brokers
from app.capacity.model import (
    CODECS,
    DEFAULT_COSTS,
    MIB,
    CapacityError,
    Hardware,
    Throughput,
    Workload,
    throughput,
)
from app.capacity.quota import BrokerLoad, allocate, parse_load
from app.capacity.sizing import Demand, grow, size
from common.placement import assign_replicas, coordinator_partition

HW, WL, DEMAND = Hardware(), Workload(), Demand()
Handler = Callable[[argparse.Namespace], Any]


def add_parser(commands: argparse._SubParsersAction) -> None:
    """Register ``whatif`` and its questions on the ``kobs`` sub-command set."""
    whatif = commands.add_parser(
        "whatif",
        help="answer capacity what-if questions from the command line",
        description="Capacity what-ifs from a first-principles model of Kafka (docs/capacity.md). The "
        "defaults are LinkedIn's 2014 benchmark: 3 brokers, 1 GbE, 6 disks, 6 cores, 100-byte messages.",
    )
    questions = whatif.add_subparsers(title="questions", metavar="<question>", required=True)
    _throughput_parser(questions)
    _size_parser(questions)
    _failure_parser(questions)
    _assign_parser(questions)
    _coordinator_parser(questions)
    _quota_parser(questions)
    _question(
        questions,
        "calibration",
        "the model against the published benchmarks it is fitted on and held out from",
        _calibration,
    )


def _question(questions: argparse._SubParsersAction, name: str, help_text: str, handler: Handler):
    sub = questions.add_parser(
        name, help=help_text, description=help_text, formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
    sub.set_defaults(run=lambda args: _answer(args, handler))
    return sub


def _answer(args: argparse.Namespace, handler: Handler) -> int:
    try:
        doc, text = handler(args)
    except CapacityError as exc:
        print(f"kobs whatif: --{exc.field.replace('_', '-')}: {exc.message}", file=sys.stderr)
        return 2
    print(json.dumps(doc, indent=2) if args.json else text)
    return 0


# --- option groups shared by questions -------------------------------------------------------------


def _hardware_options(sub: argparse.ArgumentParser) -> None:
    g = sub.add_argument_group("hardware (per broker; clients have the same NIC)")
    g.add_argument("--brokers", type=int, default=HW.brokers, help="number of brokers")
    g.add_argument("--nic-gbps", type=float, default=HW.nic_gbps, help="NIC speed, Gb/s")
    g.add_argument("--disks", type=int, default=HW.disks, help="data disks per broker")
    g.add_argument("--disk-mbps", type=float, default=HW.disk_mbps, help="sequential MiB/s of ONE disk")
    g.add_argument("--disk-tb", type=float, default=HW.disk_tb, help="capacity of one disk, TB")
    g.add_argument("--cores", type=int, default=HW.cores, help="CPU cores per broker")
    g.add_argument("--clock-ghz", type=float, default=HW.clock_ghz, help="CPU clock, GHz")
    g.add_argument("--ram-gb", type=float, default=HW.ram_gb, help="RAM per broker, GB")
    g.add_argument(
        "--heap-gb", type=float, default=HW.heap_gb, help="broker JVM heap; the rest is page cache"
    )


def _pick(cls: type, args: argparse.Namespace) -> Any:
    return cls(**{f.name: getattr(args, f.name) for f in fields(cls) if hasattr(args, f.name)})


def _with_changes(hw: Hardware, wl: Workload, changes: Sequence[str]) -> tuple[Hardware, Workload]:
    """Apply ``KEY=VALUE`` changes to whichever of hardware or workload has the field."""
    for change in changes:
        key, sep, value = change.partition("=")
        name = key.strip().replace("-", "_")
        target = hw if name in Hardware.__dataclass_fields__ else wl
        if not sep or name not in type(target).__dataclass_fields__:
            known = sorted(
                n.replace("_", "-") for n in (*Hardware.__dataclass_fields__, *Workload.__dataclass_fields__)
            )
            raise CapacityError("what_if", f"{change!r} is not KEY=VALUE with KEY one of {', '.join(known)}")
        try:
            typed = type(getattr(target, name))(value)
        except ValueError:
            raise CapacityError("what_if", f"{change!r}: {value!r} is not a valid {name}") from None
        if target is hw:
            hw = replace(hw, **{name: typed})
        else:
            wl = replace(wl, **{name: typed})
    return hw, wl


# --- throughput ---------------------------------------------------------------------------------------


def _throughput_parser(questions: argparse._SubParsersAction) -> None:
    sub = _question(
        questions, "throughput", "producer and consumer throughput and the bottleneck", _throughput
    )
    _hardware_options(sub)
    g = sub.add_argument_group("workload")
    g.add_argument("--message-bytes", type=int, default=WL.message_bytes, help="payload bytes per message")
    g.add_argument("--batch-bytes", type=int, default=WL.batch_bytes, help="producer batch.size")
    g.add_argument("--acks", choices=["0", "1", "all", "-1"], default=WL.acks, help="producer acks")
    g.add_argument(
        "--replication-factor", type=int, default=WL.replication_factor, help="replicas per partition"
    )
    g.add_argument("--partitions", type=int, default=WL.partitions, help="partitions of the topic")
    g.add_argument("--producers", type=int, default=WL.producers, help="producer threads, one per machine")
    g.add_argument("--consumers", type=int, default=WL.consumers, help="consumer threads in one group")
    g.add_argument("--compression", choices=list(CODECS), default=WL.compression, help="compression.type")
    g.add_argument(
        "--compression-ratio",
        type=float,
        default=WL.compression_ratio,
        help="how much the codec shrinks your records; 0: its published ratio on the Silesia corpus",
    )
    g.add_argument(
        "--backlog-gb",
        type=float,
        default=WL.backlog_gb,
        help="how far behind the consumers read, GB of payload: past the page cache they read from disk",
    )
    g.add_argument(
        "--what-if",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="compare with a change, e.g. brokers=6, acks=all, replication-factor=3 (repeatable)",
    )


def _throughput(args: argparse.Namespace) -> tuple[dict, str]:
    if args.acks == "-1":
        args.acks = "all"
    hw, wl = _pick(Hardware, args), _pick(Workload, args)
    now = throughput(hw, wl)
    doc = now.as_dict()
    columns = {"now": now}
    if args.what_if:
        then = throughput(*_with_changes(hw, wl, args.what_if))
        doc["what_if"] = {"changes": args.what_if, **then.as_dict()}
        columns["what-if (" + ", ".join(args.what_if) + ")"] = then
    return doc, _throughput_table(columns)


def _throughput_table(columns: dict[str, Throughput]) -> str:
    rows = [["", *columns]]
    for side in ("produce", "consume"):
        bounds = {name: getattr(t, side) for name, t in columns.items()}
        rows.append([f"{side} records/s", *(f"{b.records_per_s:,.0f}" for b in bounds.values())])
        rows.append(
            [
                f"{side} MB/s",
                *(
                    f"{t.mb_per_s(b.records_per_s):,.1f}"
                    for t, b in zip(columns.values(), bounds.values(), strict=True)
                ),
            ]
        )
        rows.append([f"{side} bottleneck", *(f"{b.name} ({b.kind})" for b in bounds.values())])
    first = next(iter(columns.values()))
    bound_rows = [["bound (now)", "records/s", "kind"]]
    bound_rows += [
        [b.name, f"{b.records_per_s:,.0f}", b.kind] for b in (*first.produce_bounds, *first.consume_bounds)
    ]
    return table(rows) + "\n\n" + table(bound_rows) + "\n(MB/s: payload MiB/s, as LinkedIn reported them)"


# --- calibration ---------------------------------------------------------------------------------------


def _calibration(_args: argparse.Namespace) -> tuple[dict, str]:
    costs = DEFAULT_COSTS
    median, worst = calibration.error(calibration.compare(calibration.HELD_OUT, costs))
    rows = [
        {**c.row.as_dict(), "fitted": c.row in calibration.FITTED, "model_records_per_s": round(c.model)}
        for c in calibration.compare((*calibration.FITTED, *calibration.HELD_OUT), costs)
    ]
    doc = {"costs": asdict(costs), "held_out_median_factor": median, "held_out_worst_factor": worst,
           "rows": rows, "sources": calibration.SOURCES}  # fmt: skip
    return doc, calibration.report(costs)


# --- size ---------------------------------------------------------------------------------------------


def _size_parser(questions: argparse._SubParsersAction) -> None:
    sub = _question(questions, "size", "disk, page cache and broker count for a sustained demand", _size)
    _hardware_options(sub)
    g = sub.add_argument_group("demand")
    g.add_argument("--ingress-mbps", type=float, default=DEMAND.ingress_mbps, help="payload MiB/s produced")
    g.add_argument(
        "--message-bytes", type=int, default=DEMAND.message_bytes, help="payload bytes per message"
    )
    g.add_argument("--replication-factor", type=int, default=DEMAND.replication_factor, help="replicas")
    g.add_argument("--partitions", type=int, default=DEMAND.partitions, help="partitions in all topics")
    g.add_argument("--consumer-groups", type=int, default=DEMAND.consumer_groups, help="groups reading all")
    g.add_argument(
        "--retention-hours", type=float, default=DEMAND.retention_hours, help="log.retention.hours"
    )
    g.add_argument("--read-behind-s", type=float, default=DEMAND.read_behind_s, help="lag served from cache")
    g.add_argument(
        "--headroom", type=float, default=DEMAND.headroom, help="fraction of each resource kept free"
    )
    g.add_argument("--growth-pct", type=float, help="also size for traffic grown by this many percent")


def _size(args: argparse.Namespace) -> tuple[dict, str]:
    hw, demand = _pick(Hardware, args), _pick(Demand, args)
    now = size(hw, demand)
    doc = now.as_dict()
    columns = {"now": doc}
    if args.growth_pct is not None:
        doc["growth"] = {"growth_pct": args.growth_pct, **size(hw, grow(demand, args.growth_pct)).as_dict()}
        columns[f"+{args.growth_pct:g} %"] = doc["growth"]
    labels = {
        "disk_gb_total": "disk, all brokers (GB)",
        "disk_gb_per_broker": "disk per broker (GB)",
        "page_cache_gb_per_broker": "page cache per broker (GB)",
        "brokers_needed": f"brokers needed ({demand.headroom:.0%} headroom)",
        "binding_resource": "binding resource",
    }
    rows = [["", *columns]] + [[label, *(str(c[k]) for c in columns.values())] for k, label in labels.items()]
    rows += [
        [f"use of {r} on {hw.brokers} brokers", *(f"{c['utilisation'][r]:.0%}" for c in columns.values())]
        for r in doc["utilisation"]
    ]
    return doc, table(rows)


# --- broker failure -----------------------------------------------------------------------------------


def _producer_arg(text: str) -> Producer:
    """NAME=MBPS[:acks=all][:unkeyed] — a producer writing MBPS MiB/s over all partitions."""
    head, *flags = text.split(":")
    name, _, rate = head.partition("=")
    try:
        options = dict(flag.split("=", 1) if "=" in flag else (flag, True) for flag in flags)
        unknown = set(options) - {"acks", "unkeyed", "buffer-mb"}
        if not name or unknown:
            raise ValueError
        buffer_mib = float(options.get("buffer-mb", DEFAULT_BUFFER_MEMORY / MIB))
        acks = "all" if options.get("acks") == "-1" else str(options.get("acks", "1"))
        return Producer.from_mib(name, float(rate), acks, not options.get("unkeyed"), buffer_mib)  # type: ignore[arg-type]
    except (ValueError, CapacityError) as exc:
        reason = (
            getattr(exc, "message", str(exc)) or "write it like web=5 or web=5:acks=all:unkeyed:buffer-mb=64"
        )
        raise argparse.ArgumentTypeError(f"{text!r}: {reason}") from None


def _id_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a list of broker ids — write it like 0,1,2"
        ) from None


def _placement_options(sub: argparse.ArgumentParser, brokers: str, partitions: int, rf: int) -> None:
    g = sub.add_argument_group("placement (Kafka's rack-unaware algorithm)")
    g.add_argument("--brokers", type=_id_list, default=_id_list(brokers), help="broker ids, comma-separated")
    g.add_argument("--partitions", type=int, default=partitions, help="partitions of the topic")
    g.add_argument("--replication-factor", type=int, default=rf, help="replicas per partition, 1..brokers")
    g.add_argument("--start-index", type=int, default=0, help="startIndex (Kafka picks it at random)")
    g.add_argument("--replica-shift", type=int, default=0, help="nextReplicaShift (Kafka picks it at random)")


def _placement(args: argparse.Namespace) -> dict[int, list[int]]:
    return assign_replicas(
        args.brokers, args.partitions, args.replication_factor, args.start_index, args.replica_shift
    )


def _failure_parser(questions: argparse._SubParsersAction) -> None:
    sub = _question(
        questions,
        "broker-failure",
        "which partitions go offline or under min ISR, and which producers block and when, if brokers die",
        _failure,
    )
    _placement_options(sub, "0,1,2", 16, 1)
    sub.add_argument(
        "--broker", type=int, action="append", required=True, help="a broker that dies (repeatable)"
    )
    sub.add_argument("--min-insync-replicas", type=int, default=1, help="min.insync.replicas of the topic")
    sub.add_argument(
        "--producer",
        type=_producer_arg,
        action="append",
        default=[],
        metavar="NAME=MBPS[:acks=all][:unkeyed][:buffer-mb=32]",
        help="a producer writing MBPS MiB/s over all partitions (keyed unless :unkeyed; repeatable)",
    )


def _failure(args: argparse.Namespace) -> tuple[dict, str]:
    impact = lose_brokers(_placement(args), set(args.broker), args.min_insync_replicas, args.producer)
    doc = impact.as_dict()
    rows = [
        ["lost brokers", ", ".join(map(str, impact.lost))],
        ["offline partitions", _ids(impact.offline)],
        ["under min ISR", _ids(impact.under_min_isr)],
        ["under-replicated", _ids(impact.under_replicated)],
    ]
    text = table(rows, header=False)
    if impact.producers:
        prows = [["producer", "stuck partitions", "stuck MiB/s", "send() blocks after"]]
        for p in impact.producers:
            blocks = "never" if p.seconds_to_block is None else f"{p.seconds_to_block:,.1f} s"
            prows.append([p.name, _ids(p.stuck_partitions), f"{p.stuck_bytes_per_s / MIB:.3f}", blocks])
        text += "\n\n" + table(prows)
    return doc, text


def _ids(ids: Sequence[int]) -> str:
    return ", ".join(map(str, ids)) or "none"


# --- assign, coordinator, quota -----------------------------------------------------------------------


def _assign_parser(questions: argparse._SubParsersAction) -> None:
    sub = _question(questions, "assign", "replica placement with Kafka's algorithm", _assign)
    _placement_options(sub, "0,1,2,3,4", 10, 3)


def _assign(args: argparse.Namespace) -> tuple[dict, str]:
    placement = _placement(args)
    rows = [["partition", "replicas", "leader"]]
    rows += [[str(p), ",".join(map(str, r)), str(r[0])] for p, r in placement.items()]
    return {str(p): r for p, r in placement.items()}, table(rows)


def _coordinator_parser(questions: argparse._SubParsersAction) -> None:
    sub = _question(questions, "coordinator", "the __consumer_offsets partition coordinating a group", _coord)
    sub.add_argument("--group", required=True, help="group.id")
    sub.add_argument("--offsets-partitions", type=int, default=50, help="offsets.topic.num.partitions")


def _coord(args: argparse.Namespace) -> tuple[dict, str]:
    partition = coordinator_partition(args.group, args.offsets_partitions)
    return {"partition": partition}, f"group {args.group!r}: __consumer_offsets partition {partition}"


def _broker_load(text: str) -> tuple[int, BrokerLoad]:
    try:
        return parse_load(text)
    except CapacityError as exc:
        raise argparse.ArgumentTypeError(exc.message) from None


def _quota_parser(questions: argparse._SubParsersAction) -> None:
    sub = _question(questions, "quota", "split an instance's throughput limit over brokers (CKafka)", _quota)
    sub.add_argument("--limit-mbps", type=float, required=True, help="the instance's throughput limit, MB/s")
    sub.add_argument(
        "--broker",
        type=_broker_load,
        action="append",
        required=True,
        metavar="ID=PARTITIONS:TRAFFIC_MBPS",
        help="a broker's partition count and current traffic (repeat per broker)",
    )
    sub.add_argument("--storage-full", action="store_true", help="the instance's storage is at capacity")


def _quota(args: argparse.Namespace) -> tuple[dict, str]:
    result = allocate(args.limit_mbps, dict(args.broker), args.storage_full)
    rows = [["broker", "allocation MB/s"]] + [[str(b), f"{v:.2f}"] for b, v in result.allocation_mbps.items()]
    note = (
        f"rule: {result.rule}; producing {'BLOCKED (storage full)' if result.produce_blocked else 'allowed'}"
    )
    return result.as_dict(), table(rows) + "\n" + note


def table(rows: Sequence[Sequence[str]], header: bool = True) -> str:
    """Left-aligned columns; the first row is underlined when it is a header."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    if header:
        lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
