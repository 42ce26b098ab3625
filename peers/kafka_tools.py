"""Kafka's own command-line tools, run from the jar set the brokers run from: the independent truth tests
cross-check our derived numbers against (never our own code).

Each call starts one tool JVM (1 to 3 s here) with the options a user would type after ``kafka-topics.sh``
and the like; parsers turn the tools' printed tables into plain rows.
"""

from __future__ import annotations

import json
import re
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from peers import jvm
from peers.process import ManagedProcess, PeerError, tcp_ready

# Script name → main class, as in Kafka's bin/ scripts (4.x and 3.9 alike).
MAIN_CLASSES = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-jmx": "org.apache.kafka.tools.JmxTool",
    "kafka-configs": "kafka.admin.ConfigCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
}


# Admin client settings of the tools' --command-config: a request to a hung broker fails in 5 s, not 30 s.
ADMIN_TIMEOUTS = "request.timeout.ms=5000\ndefault.api.timeout.ms=15000\n"
# A tool whose request timed out runs again for up to this long: after a KRaft controller hangs, a broker's
# channel for forwarded requests (listPartitionReassignments, which kafka-topics --describe sends) keeps
# waiting on it (47 s seen here) before it turns to the new controller; until then those requests time out.
RETRY_S = 90.0
TIMED_OUT = "org.apache.kafka.common.errors.TimeoutException"


def run_tool(tool: str, *args: str, profile: str = "kafka", timeout_s: float = 120) -> str:
    """Run one of Kafka's tools and return what it printed; PeerError with its output if it fails."""
    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            return _run_once(tool, args, profile, timeout_s)
        except PeerError as exc:
            if TIMED_OUT not in str(exc) or time.monotonic() > deadline:
                raise


def tool_argv(
    tool: str, *args: str, profile: str = "kafka", heap: str = "256m", quick: bool = True
) -> list[str]:
    """The command line of one of Kafka's tools (``MAIN_CLASSES``) with the options after its script name;
    ``quick``: the JVM starts fast and never runs the optimizing compiler (a short tool run), else a full
    JIT (a tool measuring throughput)."""
    jit = ["-XX:TieredStopAtLevel=1"] if quick else []
    return ["java", f"-Xmx{heap}", *jit, "-cp", jvm.classpath(profile), MAIN_CLASSES[tool], *args]


def _run_once(tool: str, args: tuple[str, ...], profile: str, timeout_s: float) -> str:
    argv = tool_argv(tool, *args, profile=profile)
    with tempfile.NamedTemporaryFile("w", suffix=".properties") as admin_config:
        if tool in ("kafka-topics", "kafka-consumer-groups"):
            admin_config.write(ADMIN_TIMEOUTS)
            admin_config.flush()
            argv += ["--command-config", admin_config.name]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        raise PeerError(f"{tool} {' '.join(args)} failed ({done.returncode}): {done.stderr or done.stdout}")
    return done.stdout


@dataclass(frozen=True)
class PartitionRow:
    """One partition as ``kafka-topics --describe`` prints it (leader -1 or none when offline)."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


def _ids(text: str) -> tuple[int, ...]:
    return tuple(int(i) for i in text.split(",") if i.strip())


def parse_describe_topics(output: str) -> list[PartitionRow]:
    """Partition lines of ``kafka-topics --describe``: ``Topic: t<TAB>Partition: 0<TAB>Leader: 1 ...``."""
    rows = []
    for line in output.splitlines():
        fields = dict(
            f.split(": ", 1) if ": " in f else (f.rstrip(":"), "") for f in line.strip().split("\t")
        )
        if "Partition" not in fields:
            continue  # the topic's summary line
        leader = fields["Leader"].strip()
        rows.append(
            PartitionRow(
                fields["Topic"],
                int(fields["Partition"]),
                int(leader) if leader.lstrip("-").isdigit() else -1,  # "none" when offline
                _ids(fields["Replicas"]),
                _ids(fields["Isr"]),
            )
        )
    return rows


def describe_topics(bootstrap: str, *options: str, topic: str | None = None) -> list[PartitionRow]:
    """``kafka-topics --describe`` with filters such as ``--under-replicated-partitions``,
    ``--under-min-isr-partitions`` or ``--unavailable-partitions``."""
    args = ["--bootstrap-server", bootstrap, "--describe", *options, *(["--topic", topic] if topic else [])]
    return parse_describe_topics(run_tool("kafka-topics", *args))


@dataclass(frozen=True)
class GroupRow:
    """One partition of ``kafka-consumer-groups --describe`` (None where the tool prints ``-``)."""

    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    host: str | None = None  # of the member the partition is assigned to
    client_id: str | None = None


def parse_describe_group(output: str) -> list[GroupRow]:
    def number(text: str) -> int | None:
        return int(text) if text.lstrip("-").isdigit() else None

    def text(cell: dict[str, str], name: str) -> str | None:
        return None if cell.get(name, "-") == "-" else cell[name]

    rows, header = [], None
    for line in output.splitlines():
        cells = line.split()
        if cells[:2] == ["GROUP", "TOPIC"]:
            header = cells
        elif header and len(cells) >= 6:
            cell = dict(zip(header, cells, strict=False))
            rows.append(
                GroupRow(
                    cell["GROUP"],
                    cell["TOPIC"],
                    int(cell["PARTITION"]),
                    number(cell["CURRENT-OFFSET"]),
                    number(cell["LOG-END-OFFSET"]),
                    number(cell["LAG"]),
                    text(cell, "HOST"),
                    text(cell, "CLIENT-ID"),
                )
            )
    return rows


def describe_group(bootstrap: str, group: str) -> list[GroupRow]:
    """``kafka-consumer-groups --describe --group G``: committed offset, end offset and lag per partition."""
    return parse_describe_group(
        run_tool("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group)
    )


def group_coordinator(bootstrap: str, group: str) -> int:
    """``kafka-consumer-groups --describe --group G --state``: the id of the group's coordinator (the
    ``COORDINATOR (ID)`` column reads ``host:port (id)``)."""
    output = run_tool(
        "kafka-consumer-groups", "--bootstrap-server", bootstrap, "--describe", "--group", group, "--state"
    )
    found = re.search(rf"^{re.escape(group)}\s+\S+\s+\((\d+)\)", output, re.MULTILINE)
    if not found:
        raise PeerError(f"no coordinator for group {group} in: {output.strip()}")
    return int(found[1])


def lead(
    bootstrap: str, topic: str, partition: int, replicas: tuple[int, ...], timeout_s: float = 60
) -> None:
    """Make ``replicas[0]`` the partition's leader as an operator would: ``kafka-reassign-partitions`` puts
    the replicas in this order (the first is the preferred leader), ``kafka-leader-election --election-type
    PREFERRED`` elects it."""
    plan = {
        "version": 1,
        "partitions": [{"topic": topic, "partition": partition, "replicas": list(replicas)}],
    }
    with tempfile.NamedTemporaryFile("w", suffix=".json") as plan_file:
        json.dump(plan, plan_file)
        plan_file.flush()
        common = ("--bootstrap-server", bootstrap, "--reassignment-json-file", plan_file.name)
        run_tool("kafka-reassign-partitions", *common, "--execute")
        deadline = time.monotonic() + timeout_s
        while "is still in progress" in run_tool("kafka-reassign-partitions", *common, "--verify"):
            if time.monotonic() > deadline:
                raise PeerError(
                    f"the reassignment of {topic}-{partition} did not complete in {timeout_s:g} s"
                )
            time.sleep(1)
    election = ("--election-type", "PREFERRED", "--topic", topic, "--partition", str(partition))
    run_tool("kafka-leader-election", "--bootstrap-server", bootstrap, *election)


def end_offsets(bootstrap: str, topic: str, time: str = "-1") -> dict[int, int]:
    """``kafka-get-offsets --topic T --time -1`` (latest; ``-2`` earliest): partition → offset."""
    output = run_tool("kafka-get-offsets", "--bootstrap-server", bootstrap, "--topic", topic, "--time", time)
    found = {}
    for line in output.split():
        _, partition, offset = line.rsplit(":", 2)
        found[int(partition)] = int(offset)
    return found


def delete_records(bootstrap: str, topic: str, before: dict[int, int]) -> None:
    """``kafka-delete-records``: each partition's log start moves to its offset in ``before`` (the records
    before it are gone, as retention deletes them)."""
    partitions = [{"topic": topic, "partition": p, "offset": o} for p, o in before.items()]
    with tempfile.NamedTemporaryFile("w", suffix=".json") as offsets:
        json.dump({"version": 1, "partitions": partitions}, offsets)
        offsets.flush()
        run_tool("kafka-delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", offsets.name)


def quorum_status(bootstrap: str) -> dict[str, str]:
    """``kafka-metadata-quorum describe --status`` (KRaft): its ``Key: value`` lines, e.g. ``LeaderId``."""
    output = run_tool("kafka-metadata-quorum", "--bootstrap-server", bootstrap, "describe", "--status")
    return {
        key.strip(): value.strip()
        for key, sep, value in (line.partition(":") for line in output.splitlines())
        if sep
    }


def jmx_values(address: str, *object_names: str) -> dict[str, float]:
    """``kafka-jmx --one-time``: ``ObjectName:Attribute`` → value for every numeric attribute of the
    beans matching any of ``object_names`` (a pattern may match many; NaN stays NaN)."""
    url = f"service:jmx:rmi:///jndi/rmi://{address}/jmxrmi"
    names = [arg for name in object_names for arg in ("--object-name", name)]
    output = run_tool(
        "kafka-jmx", "--jmx-url", url, *names, "--one-time", "true", "--report-format", "csv"
    )  # fmt: skip
    values = {}
    for line in output.splitlines():
        key, _, value = line.rpartition(",")
        if key == "time" or not key:
            continue
        try:
            values[key.strip('"')] = float(value.strip('"'))
        except ValueError:
            continue  # a non-numeric attribute (RateUnit, ...)
    return values


def log_dir_sizes(bootstrap: str, topic: str) -> dict[tuple[int, int], int]:
    """``kafka-log-dirs --describe --topic-list T`` (the DescribeLogDirs API): (broker, partition) → bytes
    of that replica's log."""
    output = run_tool("kafka-log-dirs", "--bootstrap-server", bootstrap, "--describe", "--topic-list", topic)
    doc = json.loads(next(line for line in output.splitlines() if line.startswith("{")))
    sizes = {}
    for broker in doc["brokers"]:
        for log_dir in broker["logDirs"]:
            for replica in log_dir["partitions"]:
                name, _, partition = replica["partition"].rpartition("-")
                if name == topic and not replica.get("isFuture"):
                    sizes[broker["broker"], int(partition)] = replica["size"]
    return sizes


class ConsoleProducer(ManagedProcess):
    """``kafka-console-producer`` with remote JMX on ``jmx_port``: a real Java producer (``client.id`` and
    the other producer ``properties`` in its ``--command-config``) that sends ``lines`` to ``topic``, one
    record each, then stays connected and idle with its stdin open, so its ``kafka.producer`` beans can be
    read while they hold still. With ``jmx_credentials`` (user, password) its JMX requires that login, from
    a password file in the format of a broker's (``com.sun.management.jmxremote.password.file``). Ready
    once the JMX port answers (the lines may still be in flight)."""

    def __init__(
        self,
        run_dir: Path,
        bootstrap: str,
        topic: str,
        lines: Iterable[str],
        jmx_port: int,
        properties: Mapping[str, object],
        jmx_credentials: tuple[str, str] | None = None,
    ):
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        name = f"console-producer-{jmx_port}"
        records, config = run_dir / f"{name}.lines", run_dir / f"{name}.properties"
        records.write_text("".join(f"{line}\n" for line in lines))
        config.write_text("".join(f"{key}={value}\n" for key, value in properties.items()))
        auth = jvm.jmx_password_files(run_dir / name, jmx_credentials) if jmx_credentials else None
        java = [
            "java", "-Xmx128m", "-XX:TieredStopAtLevel=1", *jvm.jmx_flags(jmx_port, auth),
            "-cp", jvm.classpath("kafka"), MAIN_CLASSES["kafka-console-producer"],
            "--bootstrap-server", bootstrap, "--topic", topic, "--command-config", str(config),
        ]  # fmt: skip
        # sh feeds the lines, then an open pipe (sleep); stopping the process group ends all three
        argv = ["sh", "-c", '(cat "$0"; exec sleep 86400) | exec "$@"', str(records), *java]
        super().__init__(name, argv, run_dir, tcp_ready(jmx_port), ports=(jmx_port,))
        self.jmx_address = f"127.0.0.1:{jmx_port}"
